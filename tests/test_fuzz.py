"""Fuzzing the input side: no input, however broken, gets past the loader as a traceback, and
every instance it accepts ends in a verified plan or an infeasibility explanation.

Hypothesis runs derandomized (the same examples on every run) and bounded; most examples stop
at validation, and the ones that reach the solver are one-class instances that solve in
milliseconds."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetopt.catalog import resolve
from fleetopt.cli import main
from fleetopt.command_support import load_checked_instance
from fleetopt.errors import InfeasibleError, InputError
from fleetopt.instance import MAX_FILE_BYTES, MAX_ITEMS, MAX_YAML_NODES, parse_instance
from fleetopt.pipeline import plan_fleet
from fleetopt.verify import verify
from tests.helpers import analytic_instance


def fuzz(examples: int):
    """Same examples on every run, no example database, no per-example deadline."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


BASE = analytic_instance(
    ["l4", "h100-sxm"], modes=("colocated", "disaggregated"), tensor_parallel=(1, 2)
)
# Inline overrides, so that mutations reach the catalog merge and the cost model too.
BASE["gpus"][0]["spec"] = {
    "memory_gb": 24,
    "price_per_gpu_hour": 0.7,
    "efficiency": {"compute": 0.5, "memory": 0.8, "interconnect": 0.7, "step_overhead_ms": 2},
}
BASE["models"][0]["spec"] = {"max_context": 131072, "kv_heads": 8}
BASE["workloads"][0]["input_tokens"] = {"mean": 1000, "p90": 2000, "max": 8000}
BASE_YAML = yaml.safe_dump(BASE, sort_keys=False)

# Values a careless (or malicious) file might hold where a field expects something else.
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e-300, 1e300, 2**63, "", "auto", "colocated", "h100-sxm", "1e3"]),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(-5, 5), max_size=2),
)


def _paths(node, prefix=()) -> list[tuple]:
    """Every place in the data a mutation can hit: keys of mappings, items of lists."""
    found = [prefix]
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in items:
        found += _paths(child, (*prefix, key))
    return found


PATHS = _paths(BASE)


@st.composite
def mutated_instances(draw) -> dict:
    """The valid base instance with one to three fields replaced, removed or misspelt."""
    data = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = data
        for key in path[:-1]:
            if not isinstance(parent, dict | list):
                break
            try:
                parent = parent[key]
            except (KeyError, IndexError, TypeError):
                break
        else:
            if not path:
                continue
            action = draw(st.sampled_from(["replace", "remove", "misspell"]))
            key = path[-1]
            if action == "replace" and isinstance(parent, dict | list):
                if isinstance(parent, dict) or key < len(parent):
                    parent[key] = draw(ODD_VALUES)
            elif action == "remove" and isinstance(parent, dict):
                parent.pop(key, None)
            elif action == "misspell" and isinstance(parent, dict) and key in parent:
                parent[str(key)[:-1] + draw(st.sampled_from(["", "s", "x", "_"]))] = parent.pop(key)
    return data


def _plan_or_explanation(data: dict) -> None:
    """The whole flow on data the loader may refuse: input errors are one line naming a place;
    an accepted instance ends in a plan that passes verify, or an infeasibility explanation."""
    try:
        instance = parse_instance(copy.deepcopy(data))
        resolved = resolve(instance)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    try:
        plan = plan_fleet(instance)
    except InfeasibleError as exc:
        assert str(exc).startswith("infeasible")
        return
    except InputError as exc:  # input read while planning (workloads given as data)
        assert str(exc) and "\n" not in str(exc)
        return
    assert plan.status == "optimal"
    assert verify(plan, resolved) == []


@fuzz(150)
@given(mutated_instances())
def test_schema_mutations_end_in_an_input_error_a_plan_or_an_explanation(data):
    _plan_or_explanation(data)


@st.composite
def valid_instances(draw) -> dict:
    """Small instances across the supported range: one class, some GPU types, rates from
    0.001 to 1e6 requests/s, lengths from a few tokens to long prompts, with or without SLOs."""
    gpus = draw(
        st.lists(
            st.sampled_from(["l4", "a10g", "l40s", "a100-80gb", "h100-sxm", "h200"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    return analytic_instance(
        gpus,
        requests_per_s=10 ** draw(st.floats(-3, 6)),
        input_tokens=draw(st.sampled_from([8, 200, 1000, 8000, 60000])),
        output_tokens=draw(st.sampled_from([4, 100, 500, 2000])),
        ttft_ms=draw(st.sampled_from([None, 100, 1000, 10000])),
        tpot_ms=draw(st.sampled_from([None, 10, 30, 100])),
        model=draw(st.sampled_from(["llama-3.1-8b", "llama-3.1-70b"])),
        modes=draw(
            st.sampled_from([("colocated",), ("disaggregated",), ("colocated", "disaggregated")])
        ),
        tensor_parallel=draw(st.sampled_from([(1,), (1, 2, 4), (8,)])),
    )


@fuzz(15)
@given(valid_instances())
def test_valid_instances_end_in_a_verified_plan_or_an_explanation(data):
    _plan_or_explanation(data)


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def _load_text(folder: Path, text: str | bytes) -> None:
    path = folder / "fuzzed.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    try:
        load_checked_instance(str(path))
    except InputError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)


@st.composite
def edited_yaml(draw) -> str:
    """The base instance's YAML with a few characters deleted, inserted or replaced."""
    text = BASE_YAML
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        insert = draw(
            st.sampled_from(["", ":", "- ", "  ", "\n", "[", "{", "&a", "*a", "!!", "'", "\t", "é"])
        )
        cut = draw(st.integers(0, 3))
        text = text[:at] + insert + text[at + cut :]
    return text


@fuzz(150)
@given(st.one_of(edited_yaml(), st.text(max_size=200), st.binary(max_size=100)))
def test_raw_yaml_text_never_escapes_as_a_traceback(folder, text):
    _load_text(folder, text)


@fuzz(40)
@given(st.one_of(edited_yaml(), st.text(max_size=80)))
def test_cli_exits_with_a_documented_code_and_no_traceback(folder, text):
    path = folder / "cli.yaml"
    path.write_text(text, encoding="utf-8")
    for args in (["validate", str(path)], ["solve", str(path), "--format", "json"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (0, 2, 3), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "text, says",
    [
        (
            "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + "".join(
                f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                for p, c in zip("abcdefg", "bcdefgh", strict=True)
            ),
            f"more than {MAX_YAML_NODES:,} values",
        ),
        ("a: &a [*a]\n", f"more than {MAX_YAML_NODES:,} values"),
        ("[" * 1000 + "]" * 1000, "nested too deeply"),
        ("name: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        (BASE_YAML.replace("requests_per_s: 10.0", "requests_per_s: .inf"), "not a finite number"),
    ],
    ids=["alias-bomb", "recursive-alias", "deep-nesting", "python-tag", "list", "infinity"],
)
def test_hostile_yaml_is_refused_in_one_line(folder, text, says):
    path = folder / "hostile.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=says):
        load_checked_instance(str(path))


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(folder):
    path = folder / "big.yaml"
    path.write_text(BASE_YAML + "#" * MAX_FILE_BYTES)
    with pytest.raises(InputError, match=f"over the limit of {MAX_FILE_BYTES:,}"):
        load_checked_instance(str(path))


@pytest.mark.parametrize("field", sorted(MAX_ITEMS))
def test_lists_over_their_limit_name_the_field_and_the_limit(field):
    data = copy.deepcopy(BASE)
    data[field] = [{}] * (MAX_ITEMS[field] + 1)
    with pytest.raises(InputError, match=rf"{field}: .* over the limit of {MAX_ITEMS[field]}"):
        parse_instance(data)


@pytest.mark.parametrize(
    "where, key, nearest",
    [
        ((), "workload", "workloads"),
        (("workloads", 0), "request_per_s", "requests_per_s"),
        (("workloads", 0, "slo"), "ttft", "ttft_ms"),
        (("gpus", 0), "max_gpu", "max_gpus"),
        (("serving",), "tensor_paralel", "tensor_parallel"),
    ],
)
def test_an_unknown_field_is_refused_with_the_nearest_valid_name(where, key, nearest):
    data = copy.deepcopy(BASE)
    node = data
    for step in where:
        node = node[step]
    node[key] = 1
    with pytest.raises(InputError, match=f"{key}: unknown field; did you mean `{nearest}`"):
        parse_instance(data)


def test_the_valid_names_listed_are_those_a_file_writes():
    """`rate` is the name the schema and the docs give; the model's attribute name,
    `rate_source`, was listed instead."""
    data = copy.deepcopy(BASE)
    data["workloads"][0]["rps"] = 3
    with pytest.raises(InputError, match=r"valid here: .*, rate, rate_scale") as caught:
        parse_instance(data)
    assert "rate_source" not in str(caught.value)
