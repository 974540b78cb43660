"""Scenario grids: `--set PATH=V1,V2,...` parsed, checked against the schema, expanded.

A PATH walks the instance as its YAML reads: mapping keys by field name, list items by their
`name` (workloads, models) or `type` (gpus), so `workloads.chat.slo.tpot_ms` or, as error
messages spell it, `workloads[chat].slo.tpot_ms`. Names may contain dots (`llama-3.1-8b`); the
longest run of segments that names an item wins. Only scalar fields are swept: a list or a
mapping has no single value to put on an axis.

Every scenario is validated by the schema and looked up in the catalog before anything is
solved, so a value that makes the instance invalid is an input error (exit 2) naming its
`--set`, never a failed solve halfway through a grid.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fleetopt.errors import InputError
from fleetopt.instance import Instance, describe_validation_error, range_problem

Scalar = int | float | str
_TOKEN = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")


@dataclass(frozen=True)
class Axis:
    """One swept field: where it is, what the table calls it, the values in the order given."""

    path: str
    label: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class Scenario:
    """One point of a sweep: its place in the grid, its swept values by label, the instance."""

    index: int
    values: dict[str, Scalar]
    instance: Instance


def parse_sets(specs: list[str], instance: Instance) -> list[Axis]:
    """`--set` options as axes, each path checked against the instance and each value alone,
    so an error names the one `--set` and value at fault."""
    if not specs:
        raise InputError(
            "--set: give at least one PATH=V1,V2,... (e.g. workloads.chat.slo.tpot_ms=20,30)"
        )
    dump = instance.model_dump()
    parsed = []
    for spec in specs:
        path, values = _split(spec)
        canonical = locate(copy.deepcopy(dump), path, f"--set {spec}")[2]
        if canonical in (p for p, _ in parsed):
            raise InputError(
                f"--set {spec}: {canonical} is set twice; list all its values in one --set"
            )
        parsed.append((canonical, values))
    labels = short_labels([p for p, _ in parsed])
    axes = [Axis(p, labels[p], v) for p, v in parsed]
    for axis in axes:
        for value in axis.values:
            with_values(instance, {axis.path: value}, f"--set {axis.path}={value}")
    return axes


def _split(spec: str) -> tuple[str, tuple[Scalar, ...]]:
    path, sep, raw = spec.partition("=")
    path = path.strip()
    if not sep or not path or not raw.strip():
        raise InputError(
            f"--set {spec}: expected PATH=V1,V2,... (e.g. workloads.chat.slo.tpot_ms=20,30,50)"
        )
    values = tuple(_scalar(spec, v.strip()) for v in raw.split(","))
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise InputError(f"--set {spec}: {', '.join(repeated)} given twice; list each value once")
    return path, values


def _scalar(spec: str, text: str) -> Scalar:
    """A number where the text is one (int before float, so integer fields stay integers)."""
    if not text:
        raise InputError(f"--set {spec}: empty value; separate values by single commas")
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if not math.isfinite(value):
            raise InputError(f"--set {spec}: {text} is not a finite number")
        return value
    return text


def short_labels(paths: list[str]) -> dict[str, str]:
    """The shortest dotted suffix of each path that no other path shares: `tpot_ms`, or
    `chat.slo.tpot_ms` beside `rag.slo.tpot_ms`."""
    split = {p: _tokens(p) for p in paths}
    labels = {}
    for path, tokens in split.items():
        for n in range(1, len(tokens) + 1):
            suffix = tokens[-n:]
            if all(other[-n:] != suffix for q, other in split.items() if q != path):
                break
        labels[path] = ".".join(suffix)
    return labels


def _tokens(path: str) -> list[str]:
    return [bracket or plain for bracket, plain in _TOKEN.findall(path)]


def with_values(instance: Instance, changes: dict[str, Scalar], where: str) -> Instance:
    """The instance with each path set to its value, validated and looked up in the catalog;
    any failure is one InputError line that starts with `where` (the --set or scenario)."""
    from fleetopt.catalog import resolve

    data = instance.model_dump()
    for path, value in changes.items():
        parent, key, _ = locate(data, path, where)
        parent[key] = value
    try:
        variant = Instance.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{where}: makes the instance invalid: {describe_validation_error(exc, data)}"
        ) from None
    problem = range_problem(variant)
    if problem:
        raise InputError(f"{where}: makes the instance invalid: {problem}")
    try:
        resolve(variant)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return variant


def locate(data: dict, path: str, where: str) -> tuple[dict, str, str]:
    """The mapping that holds the scalar field a path names, its key, and the path as error
    messages spell it (`workloads[chat].slo.tpot_ms`); an optional section left out (a
    workload without `slo`) is created empty on the way, for the schema to judge."""
    tokens = _TOKEN.findall(path)
    if not tokens:
        raise InputError(f"{where}: empty path; e.g. workloads.chat.slo.tpot_ms")
    node: Any = data
    seen = ""
    created = False  # node is an optional section made empty just now: the schema judges its keys
    i = 0
    while True:
        bracket, plain = tokens[i]
        token = bracket or plain
        if isinstance(node, list):
            item, used = _item(node, tokens[i:])
            if item is None:
                names = ", ".join(_item_name(x) for x in node)
                raise InputError(
                    f"{where}: {seen} has no item named {token!r} (known: {names}); fix the name"
                )
            seen += f"[{_item_name(item)}]"
            node, i = item, i + used
        elif not isinstance(node, dict):
            raise InputError(f"{where}: {seen} is a single value; end the path there")
        elif bracket:
            raise InputError(f"{where}: {seen} is a mapping, not a list; write {seen}.{token}")
        elif token not in node and not created:
            field = f"{seen}.{token}" if seen else token
            raise InputError(
                f"{where}: {field} is not a field (fields here: {', '.join(node)}); "
                "check the spelling"
            )
        else:
            seen = f"{seen}.{token}" if seen else token
            if i == len(tokens) - 1:
                _check_scalar(node.get(token), seen, where)
                return node, token, seen
            created = node.get(token) is None
            if created:
                node[token] = {}
            node, i = node[token], i + 1
        if i == len(tokens):
            raise InputError(f"{where}: {seen} is a list item; name one of its fields")


def _item(items: list, tokens: list[tuple[str, str]]) -> tuple[dict | None, int]:
    """The list item the next tokens name, and how many tokens its name took: one in
    brackets, else the longest dotted run (names like `llama-3.1-8b` contain dots)."""
    bracket = tokens[0][0]
    spans = [1] if bracket else range(len(tokens), 0, -1)
    for span in spans:
        name = bracket or ".".join(plain for _, plain in tokens[:span])
        for item in items:
            if isinstance(item, dict) and _item_name(item) == name:
                return item, span
    return None, 0


def _item_name(item: dict) -> str:
    return str(item.get("name") or item.get("type"))


def _check_scalar(current: Any, seen: str, where: str) -> None:
    if isinstance(current, dict):
        raise InputError(
            f"{where}: {seen} is a mapping; --set takes one scalar field, e.g. "
            f"{seen}.{next(iter(current))}"
        )
    if isinstance(current, list):
        raise InputError(f"{where}: {seen} is a list; --set takes scalar fields only")


def expand(instance: Instance, axes: list[Axis]) -> list[Scenario]:
    """The cartesian product in `--set` order (the first varies slowest), every scenario
    validated before any is solved."""
    scenarios = []
    for index, combo in enumerate(itertools.product(*(a.values for a in axes))):
        values = {a.label: v for a, v in zip(axes, combo, strict=True)}
        where = "scenario " + " ".join(f"{k}={v}" for k, v in values.items())
        changes = {a.path: v for a, v in zip(axes, combo, strict=True)}
        scenarios.append(Scenario(index, values, with_values(instance, changes, where)))
    return scenarios
