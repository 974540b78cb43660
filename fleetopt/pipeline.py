"""The one-way flow: instance → catalog → perf → configs → formulation → solve → plan → verify."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

import pyomo.core as pyo
from pyomo.common.gc_manager import PauseGC

from fleetopt.catalog import Resolved, resolve
from fleetopt.configs import ConfigSet, enumerate_configs, limits_of
from fleetopt.diagnose import blocked_classes
from fleetopt.errors import InfeasibleError, Interrupted, NoPlanInTime, VerificationError
from fleetopt.extract import extract_plan
from fleetopt.formulation import build_model
from fleetopt.formulation.blocks import (
    Block,
    BlockValues,
    Solution,
    add_block,
    block_parts,
    block_values,
    cut_block,
    empty_solution,
    finish,
    split_by_period,
    whole_part,
    worth_first,
)
from fleetopt.formulation.data import GpuMarket, Period, ProgramData, Tiers
from fleetopt.formulation.model import model_columns
from fleetopt.formulation.sizing import Columns, columns
from fleetopt.formulation.tiers import cheapest_tiers
from fleetopt.instance import RANGES, Instance, Pricing
from fleetopt.plan import Plan
from fleetopt.polish import polished
from fleetopt.presolve import ModelSeconds, Presolved, incumbent_start, presolve
from fleetopt.scaled_bound import ScaledLp, scaled_lp
from fleetopt.solve import (
    WATCHED,
    Outcome,
    SolveOptions,
    builds_in_time,
    relative_gap,
    run_highs,
    seconds_left,
    time_left,
    time_share,
    time_spent,
)
from fleetopt.verify import verify
from fleetopt.workers import shared, worker_pool

BUYS_NOTHING = 1e-6
"""A throughput bound (the scale of the demand served, less the cost's tie-break) at or below
which the budget is proved to buy no fleet."""


def plan_fleet(
    instance: Instance,
    options: SolveOptions | None = None,
    enumerated: tuple[Resolved, ConfigSet] | None = None,
) -> Plan:
    """Cheapest fleet (or most throughput for the budget) that meets every target, verified.
    `enumerated`: the instance resolved and its configs, where the caller has them already."""
    options = options or SolveOptions()
    if instance.length_routed:
        from fleetopt.workload.routing import plan_length_routing

        return plan_length_routing(instance, options, plan_fleet)
    if enumerated is None:
        resolved = resolve(instance)
        enumerated = resolved, enumerate_configs(resolved, options.jobs)
    resolved, config_set = enumerated
    blocked = blocked_classes(config_set, resolved)
    if blocked:
        raise InfeasibleError("infeasible: " + " | ".join(blocked))
    data = program_data(resolved, config_set)
    began = time.perf_counter()  # the time limit counts from here: enumerating comes on top
    solved = solve_program(data, options)
    outcome = solved.outcome
    if outcome.status == "infeasible":
        raise InfeasibleError(explain_limits(data, options, began))
    # In throughput mode the empty fleet is a plan: one at scale 0 proves nothing until the
    # bound does (a solve stopped by the time limit had claimed the budget buys no fleet).
    empty = (
        data.maximize_throughput and solved.solution is not None and solved.solution.alpha <= 1e-9
    )
    proved = outcome.status == "optimal" or (
        outcome.bound is not None and outcome.bound <= BUYS_NOTHING
    )
    if outcome.status == "no_solution" or (empty and not proved):
        raise NoPlanInTime(
            f"no fleet found within the time limit ({options.time_limit} s); raise --time-limit"
        )
    if empty:
        raise InfeasibleError(
            f"infeasible: the budget of {data.budget_per_hour:,.2f} $/h (objective.budget_per_hour) "
            "buys no fleet that serves any of the demand within its targets; raise the budget"
        )
    if data.maximize_throughput:
        solved = _cheapest_at_scale(data, solved, options, began)
        outcome = solved.outcome
    # The seconds from here to the plan, every stage and block: the blocks' own seconds add up
    # their solves, not the presolves that answered for them, nor the time they ran side by side.
    outcome = dataclasses.replace(outcome, seconds=time.perf_counter() - began)
    schedule = period_schedule(instance)[1]
    tiered = instance.demand_profile is not None or instance.pricing is not None
    plan = extract_plan(
        instance.name,
        data,
        solved.solution,
        outcome,
        limits_of(resolved),
        schedule if tiered else None,
    )
    plan.interrupted = outcome.interrupted
    if tiered and not data.maximize_throughput and not outcome.interrupted:
        baseline = time_left(options, began)  # the time limit covers both solves
        plan.peak_sized_cost_per_hour = _peak_sized_cost(plan, resolved, config_set, baseline)
    problems = verify(plan, resolved)
    if problems:
        raise VerificationError("plan failed verification: " + "; ".join(problems[:5]))
    return plan


def plan_variant(instance: Instance, options: SolveOptions | None = None) -> Plan:
    """`plan_fleet` for one of several variants a command solves in turn (sweep, pareto,
    compare): Ctrl-C stops them all. HiGHS, running in this process, catches it and hands back
    its best plan, which would otherwise answer for the variant and the next one begin."""
    plan = plan_fleet(instance, options)
    if plan.interrupted:
        raise Interrupted("interrupted")
    return plan


def period_schedule(instance: Instance) -> tuple[list[Period], list[int]]:
    """The program's periods — one per distinct demand level, carrying all its hours, since
    periods of equal demand have the same best fleet — and, for each period of the profile,
    the program period that serves it."""
    profile = instance.demand_profile
    if profile is None:
        return [Period()], [0]
    levels: dict[float, int] = {}
    schedule = [levels.setdefault(m, len(levels)) for m in profile.multipliers]
    periods = [Period(m, profile.period_hours * profile.multipliers.count(m)) for m in levels]
    return periods, schedule


def _peak_sized_cost(
    plan: Plan, resolved: Resolved, config_set: ConfigSet, options: SolveOptions
) -> float | None:
    """$/h of one fleet sized for the peak period and paid on demand around the clock (None
    where its solve stops short of proving it, within what is left of the time limit).

    Without `pricing` nothing couples the periods, so the plan's own peak-period fleet is that
    fleet (to the same gap) and a second solve would only repeat it."""
    peak = max(plan.periods, key=lambda p: p.multiplier)
    if resolved.instance.pricing is None:
        return peak.cost_per_hour
    data = dataclasses.replace(
        program_data(resolved, config_set), periods=[Period(peak.multiplier, 1.0)], tiers=None
    )
    solved = solve_program(data, options)
    if solved.solution is None or solved.outcome.status != "optimal":
        return None  # a baseline not proven would overstate what the plan saves
    return round(solved.solution.cost_per_hour, 9)


@dataclass(frozen=True)
class Stats:
    """Where a solve's time went, summed over its blocks (benchmarks/scale.py prints these)."""

    blocks: int = 0
    variables: int = 0
    constraints: int = 0
    presolve_seconds: float = 0.0
    """The presolve's own work (fleetopt/presolve.py): its arithmetic, and HiGHS on its LPs and
    restricted programs; building and handing off their models is counted below."""
    build_seconds: float = 0.0
    """Pyomo model construction: every model of the block, the presolve's too."""
    handoff_seconds: float = 0.0
    """Pyomo handing models to HiGHS and reading solutions back, the presolve's too."""
    solve_seconds: float = 0.0
    """HiGHS on the last program (none where the presolve's incumbent answered without one)."""
    configs_kept: int = 0
    """Configs left in the programs HiGHS solved."""

    @classmethod
    def of(cls, solved: SolvedBlock) -> Stats:
        model, last, presolve = solved.model, solved.last, solved.presolve_models
        highs = 0.0 if last is None else last.highs_seconds
        return cls(
            1,
            model.nvariables(),
            model.nconstraints(),
            solved.presolve_seconds - presolve.build - presolve.handoff,
            solved.build_seconds + presolve.build,
            (0.0 if last is None else last.seconds - highs) + presolve.handoff,
            highs,
            len(solved.block.configs),
        )

    def __add__(self, other: Stats) -> Stats:
        pairs = zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)
        return Stats(*(a + b for a, b in pairs))


@dataclass(frozen=True)
class Solved:
    solution: Solution | None
    """None when a block is infeasible or has no incumbent."""
    outcome: Outcome
    stats: Stats


@dataclass(frozen=True)
class SolvedBlock:
    block: Block
    """The block as solved: after the presolve, a part of the block it was given."""
    model: pyo.ConcreteModel
    outcome: Outcome
    presolve_seconds: float
    presolve_models: ModelSeconds
    """What the presolve spent building its models and handing them off (in presolve_seconds)."""
    build_seconds: float
    """The last program's build (0 where the presolve's incumbent answered without one)."""
    last: Outcome | None
    """The last program's own solve, where one ran."""


@dataclass(frozen=True)
class BlockResult:
    """A solved block as plain numbers: what a worker process sends back."""

    values: BlockValues | None
    """None when the block has no plan (infeasible, or none within the time limit)."""
    outcome: Outcome
    stats: Stats


BLOCK_SECONDS = 1.0
"""The least time limit a block is given (an LP and a small MIP on most blocks), and what each
block yet to start keeps of the time left while there is enough for that."""
LATE_SECONDS = 0.2
"""What each block yet to start keeps at the least: about what a block takes to answer with its
arithmetic plan, consolidated on its group's scaled LP's configs too (0.198 s on average over
the 138 blocks of the scale benchmark's large instance, in one process, each model's columns
built once; docs/benchmarks.md). A block left less than BLOCK_SECONDS beyond that answers so
itself."""


def solve_program(data: ProgramData, options: SolveOptions, split: bool = True) -> Solved:
    """Solve the program block by block (formulation/blocks.py: exact) and merge the values;
    `split=False` solves it as one model (benchmarks/scale.py --whole measures the difference).
    With `options.jobs` > 1, blocks are solved that many at a time, one process each; each
    block's answer is the same either way.

    The time limit is for the whole: each block gets what is left when it starts less
    BLOCK_SECONDS for each later round of `jobs` blocks (at least BLOCK_SECONDS), so that the
    first blocks may use what the easy ones leave but not the time the last ones need; once
    what is left, less LATE_SECONDS a later round, is under BLOCK_SECONDS, blocks answer with
    their arithmetic plans (`block_result`), and the limit holds. Blocks then start in the
    order their LP is worth most (`worth_first`), so that the limit buys the best bound; the
    outcomes merge in block order either way."""
    deadline = None if options.time_limit is None else time.monotonic() + options.time_limit
    parts = block_parts(data) if split else [whole_part(data)]
    jobs = min(options.jobs, len(parts))
    order, groups = list(range(len(parts))), []
    if deadline is not None and len(parts) > jobs:
        order = worth_first(data, parts)
        groups = split_by_period(parts, order)
    queue = [parts[i] for i in order]
    rounds = [math.ceil((len(parts) - i) / jobs) for i in range(len(parts))]
    scaled: dict[frozenset[str], GroupLp] = {}
    results = (
        _in_parallel(data, queue, options, deadline, rounds, jobs, groups, scaled)
        if jobs > 1
        else _in_process(data, queue, options, deadline, rounds, groups, scaled)
    )
    whole, stats, outcomes = empty_solution(data), Stats(), {}
    WATCHED.blocks = (0, len(parts)) if len(parts) > 1 else None
    for done, (i, result) in enumerate(zip(order, results, strict=True), start=1):
        WATCHED.blocks = (done, len(parts)) if len(parts) > 1 else None
        stats = stats + result.stats
        outcome = result.outcome
        hours = sum(data.periods[t].hours for t in parts[i][1])
        outcomes[i] = (hours / data.total_hours, outcome)
        if result.values is None:
            return Solved(None, outcome, stats)
        if outcome.interrupted and done < len(parts):
            raise Interrupted(f"interrupted after {done} of {len(parts)} independent blocks")
        add_block(whole, result.values)
    for i, (models, periods) in enumerate(parts):
        if models in scaled and (lp := scaled[models].lp) is not None:
            weight, outcome = outcomes[i]
            (t,) = periods
            multiplier = data.periods[t].multiplier
            bound = multiplier * lp.at(multiplier).per_multiplier
            outcomes[i] = (weight, _bounded(outcome, bound))
    stats = stats + sum((group.stats for group in scaled.values()), Stats())
    merged = merge_outcomes([outcomes[i] for i in range(len(parts))])
    return Solved(finish(whole, data), merged, stats)


def block_result(
    block: Block,
    options: SolveOptions,
    deadline: float | None,
    rounds: int = 1,
    cols: Columns | None = None,
    scaled: frozenset[int] = frozenset(),
) -> BlockResult:
    """Solve one block (in this process or a worker) in what is left of the time limit, less
    BLOCK_SECONDS for each later round (`rounds` counts the rounds of blocks yet to start, its
    own included), and at least BLOCK_SECONDS. One that starts with none left, or with less
    than BLOCK_SECONDS beyond LATE_SECONDS a later round, answers with its arithmetic plan
    (`presolve`, `late`): its LP would be cut short, and the later blocks need that much to
    answer at all, HiGHS improving on that plan no later than the deadline.
    `cols`: the block's `sizing.columns`, where the caller has them; `scaled`: the configs its
    group's scaled LP uses at the block's level, where known (the presolve
    consolidates on them)."""
    late, solving = False, options
    if deadline is not None:
        left = deadline - time.monotonic()
        late = left <= 0 or (rounds > 1 and left - LATE_SECONDS * (rounds - 1) < BLOCK_SECONDS)
        share = max(left - BLOCK_SECONDS * (rounds - 1), BLOCK_SECONDS)
        options = dataclasses.replace(options, time_limit=share)
        # A late block's HiGHS stops at the deadline (past it, it only completes the arithmetic
        # plan: presolve.COMPLETE_SECONDS); a plan's routes are polished in the block's time.
        solving = dataclasses.replace(options, time_limit=max(left, 0.0)) if late else options
    # A build allocates objects by the million: collect once, after (as Pyomo's writers do).
    with PauseGC():
        solved = solve_block(block, solving, late, cols, scaled)
        values, outcome = None, solved.outcome
        if outcome.status not in ("infeasible", "no_solution"):
            outcome = polished(solved.model, outcome, options)
            values = block_values(solved.block, solved.model)
        return BlockResult(values, outcome, Stats.of(solved))


Known = dict[frozenset[str], tuple[Block, Columns]]
"""A block of each group of models and its columns (`sizing.columns`): its blocks over other
periods have the same classes and configs, and a block that answers by arithmetic spent an
eighth of its time building the columns and a twentieth sifting the configs
(docs/benchmarks.md)."""


def _cut(
    known: Known, data: ProgramData, models: frozenset[str], periods: list[int]
) -> tuple[Block, Columns]:
    """The block of these models and periods, and its columns, built once per group of models."""
    if models in known:
        like, cols = known[models]
        return cut_block(data, models, periods, like), cols
    block = cut_block(data, models, periods)
    cols = columns(block.data)
    known[models] = block, cols
    return block, cols


def _in_process(
    data: ProgramData,
    parts: list[tuple[frozenset[str], list[int]]],
    options: SolveOptions,
    deadline: float | None,
    rounds: list[int],
    groups: list[tuple[frozenset[str], list[int]]],
    scaled: dict[frozenset[str], GroupLp],
) -> Iterator[BlockResult]:
    """Each block's result, solved here one after another, after the groups' scaled LPs
    (into `scaled`)."""
    known: Known = {}
    for models, periods in groups:
        scaled[models] = group_lp(known, data, models, periods, options, deadline)
    for (models, periods), r in zip(parts, rounds, strict=True):
        block, cols = _cut(known, data, models, periods)
        used = _used(scaled.get(models), data, periods)
        yield block_result(block, options, deadline, r, cols, used)


def _in_parallel(
    data: ProgramData,
    parts: list[tuple[frozenset[str], list[int]]],
    options: SolveOptions,
    deadline: float | None,
    rounds: list[int],
    jobs: int,
    groups: list[tuple[frozenset[str], list[int]]],
    scaled: dict[frozenset[str], GroupLp],
) -> Iterator[BlockResult]:
    """Each block's result, in block order, from `jobs` worker processes, each sent the
    program once and each block's models and periods. The groups' scaled LPs go first (into
    `scaled`, once every block is in); the blocks are handed out as workers free up, so that
    one handed out after its group's LP has the configs it uses. Ctrl-C stops them all: with
    several blocks under way there is no whole plan to keep."""
    options = dataclasses.replace(options, jobs=1)
    with worker_pool(jobs, shared=data) as pool:  # closed early, a generator stops its workers
        lps = {
            models: pool.submit(_shared_group_lp, models, periods, options, deadline)
            for models, periods in groups
        }
        waiting = deque(enumerate(zip(parts, rounds, strict=True)))
        running: dict[Future, int] = {}
        finished: dict[int, BlockResult] = {}

        def hand_out() -> None:
            i, ((models, periods), r) = waiting.popleft()
            lp = lps.get(models)
            ready = lp is not None and lp.done()
            used = _used(lp.result(), data, periods) if ready else frozenset()
            future = pool.submit(_shared_block_result, models, periods, options, deadline, r, used)
            running[future] = i

        solved = 0
        try:
            while waiting and len(running) <= jobs:  # one queued beyond the workers: none idles
                hand_out()
            for i in range(len(parts)):
                while i not in finished:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        finished[running.pop(future)] = future.result()
                        if waiting:
                            hand_out()
                yield finished.pop(i)
                solved += 1
            scaled.update((models, lp.result()) for models, lp in lps.items())
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted with {solved} of {len(parts)} independent blocks solved"
            ) from None


def _used(group: GroupLp | None, data: ProgramData, periods: list[int]) -> frozenset[int]:
    """The configs a group's scaled LP uses at the level of the block's period (none where it
    has none)."""
    if group is None or group.lp is None:
        return frozenset()
    (t,) = periods
    return group.lp.at(data.periods[t].multiplier).used


def _shared_block_result(
    models: frozenset[str],
    periods: list[int],
    options: SolveOptions,
    deadline: float | None,
    rounds: int,
    scaled: frozenset[int],
) -> BlockResult:
    """`block_result` in a worker, on the block it cuts from the program its pool shares."""
    block, cols = _cut(_known, shared(), models, periods)
    return block_result(block, options, deadline, rounds, cols, scaled)


_known: Known = {}
"""A worker's `Known`: a worker holds one program (its pool's) for its life."""


@dataclass(frozen=True)
class GroupLp:
    """A group's `scaled_bound.scaled_lp` (None where it was not proved in time), and the
    seconds it took."""

    lp: ScaledLp | None
    stats: Stats


def group_lp(
    known: Known,
    data: ProgramData,
    models: frozenset[str],
    periods: list[int],
    options: SolveOptions,
    deadline: float,
) -> GroupLp:
    """The scaled LP of these models' blocks over these periods, in what is left of the time
    limit (counted as presolve in the stats)."""
    began, left = time.perf_counter(), deadline - time.monotonic()
    if left <= 0:
        return GroupLp(None, Stats())
    block, cols = _cut(known, data, models, periods)
    lp = scaled_lp(block.data, cols, dataclasses.replace(options, time_limit=left))
    return GroupLp(lp, Stats(presolve_seconds=time.perf_counter() - began))


def _shared_group_lp(
    models: frozenset[str], periods: list[int], options: SolveOptions, deadline: float
) -> GroupLp:
    """`group_lp` in a worker, on the program its pool shares."""
    return group_lp(_known, shared(), models, periods, options, deadline)


def solve_block(
    block: Block,
    options: SolveOptions,
    late: bool = False,
    cols: Columns | None = None,
    scaled: frozenset[int] = frozenset(),
) -> SolvedBlock:
    """One block, presolved by an incumbent (fleetopt/presolve.py): the reduced program holds
    every plan no dearer than the incumbent, so its optimum is the block's. Where the presolve
    spent the time limit (or `late`: none was left), or what is left would not see the
    reduced program built and presolved by HiGHS (which stops for no limit while it
    presolves), its incumbent is the answer."""
    began = time.perf_counter()
    presolved = presolve(block.data, options, late, cols, scaled)
    reduced = Block(presolved.data, [block.configs[k] for k in presolved.kept], block.periods)
    presolve_seconds = time.perf_counter() - began
    incumbent = presolved.incumbent
    if incumbent is not None and (
        incumbent.outcome.interrupted
        or late
        or time_spent(options, began)
        or not builds_in_time(model_columns(reduced.data), options, began, presolved=True)
    ):
        return _incumbent_answer(block, presolved, None, presolve_seconds)
    built = time.perf_counter()
    model = build_model(reduced.data)
    build = time.perf_counter() - built
    start = incumbent_start(presolved, model)
    outcome = run_highs(model, time_left(options, began), start, True, presolved.bound)
    maximize = block.data.maximize_throughput
    if incumbent is not None and _no_better(outcome, incumbent.outcome, maximize):
        return _incumbent_answer(block, presolved, outcome, presolve_seconds, build)
    if outcome.status == "feasible":  # stopped early: HiGHS's bound may not have passed the LP's
        outcome = _bounded(outcome, presolved.bound, maximize)
    return SolvedBlock(reduced, model, outcome, presolve_seconds, presolved.spent, build, outcome)


def _incumbent_answer(
    block: Block,
    presolved: Presolved,
    outcome: Outcome | None,
    presolve_seconds: float,
    build_seconds: float = 0.0,
) -> SolvedBlock:
    """The presolve's incumbent as the block's answer, when the solve after it stopped (time
    limit, Ctrl-C) with no plan as cheap: `feasible`, with the best bound known."""
    incumbent = presolved.incumbent
    maximize = block.data.maximize_throughput
    bounds = [presolved.bound, None if outcome is None else outcome.bound]
    bound = (min if maximize else max)((b for b in bounds if b is not None), default=None)
    # The restricted program's own bound and gap are not the block's.
    unbounded = dataclasses.replace(incumbent.outcome, status="feasible", bound=None, gap=None)
    answer = _bounded(unbounded, bound, maximize)
    if outcome is not None:
        answer = dataclasses.replace(
            answer,
            seconds=answer.seconds + outcome.seconds,
            interrupted=answer.interrupted or outcome.interrupted,
            highs_seconds=(answer.highs_seconds or 0.0) + (outcome.highs_seconds or 0.0),
        )
    kept = [block.configs[k] for k in incumbent.configs]
    return SolvedBlock(
        Block(block.data, kept, block.periods),
        incumbent.model,
        answer,
        presolve_seconds,
        presolved.spent,
        build_seconds,
        outcome,
    )


def _bounded(outcome: Outcome, bound: float | None, maximize: bool = False) -> Outcome:
    """The outcome with `bound` where it proves more than the outcome's own (a higher bound on
    a cost, a lower one on a scale where `maximize`), and its gap."""
    if bound is None or (
        outcome.bound is not None
        and (outcome.bound <= bound if maximize else outcome.bound >= bound)
    ):
        return outcome
    return dataclasses.replace(outcome, bound=bound, gap=relative_gap(outcome.objective, bound))


def _no_better(outcome: Outcome, incumbent: Outcome, maximize: bool) -> bool:
    """The reduced program's solve ended without a plan as good as the incumbent — as cheap,
    or as large a scale where `maximize` (it holds the incumbent, so only a time limit or
    Ctrl-C gets here)."""
    if outcome.objective is None:
        return True
    if maximize:
        return outcome.objective < incumbent.objective * (1 - 1e-9) - 1e-9
    return outcome.objective > incumbent.objective * (1 + 1e-9) + 1e-9


def merge_outcomes(weighted: list[tuple[float, Outcome]]) -> Outcome:
    """One outcome for blocks whose objectives add up with these weights."""
    if len(weighted) == 1:
        return weighted[0][1]
    outcomes = [o for _, o in weighted]
    objective = sum(w * o.objective for w, o in weighted)
    bounds = [o.bound for o in outcomes]
    bound = None if None in bounds else sum(w * o.bound for w, o in weighted)
    gap = None if bound is None else relative_gap(objective, bound)
    proven = all(o.status == "optimal" for o in outcomes)
    return Outcome(
        "optimal" if proven else "feasible",
        objective,
        bound,
        gap,
        sum(o.seconds for o in outcomes),
        any(o.interrupted for o in outcomes),
        sum(o.highs_seconds or 0.0 for o in outcomes),
    )


def program_data(resolved: Resolved, config_set: ConfigSet) -> ProgramData:
    objective = resolved.instance.objective
    return ProgramData(
        classes=config_set.classes,
        configs=config_set.configs,
        gpus=[
            GpuMarket(
                g.name,
                g.price_per_gpu_hour,
                g.max_gpus,
                g.gpus_per_node,
            )
            for g in resolved.gpus.values()
        ],
        maximize_throughput=objective.maximize is not None,
        budget_per_hour=objective.budget_per_hour,
        demand_scale_limit=_demand_scale_limit(resolved.instance) if objective.maximize else None,
        periods=period_schedule(resolved.instance)[0],
        tiers=_tiers(resolved.instance.pricing),
    )


def _cheapest_at_scale(
    data: ProgramData, solved: Solved, options: SolveOptions, began: float
) -> Solved:
    """The cheapest fleet that serves the demand scale the budget buys. The throughput
    objective weighs cost at 1e-6/budget, far below any gap, so HiGHS stops with any fleet
    that reaches the scale, GPUs no pool uses included (a fuzz instance with pricing: 9.8M $/h
    of a 1e7 budget where 172 serve the same). The program is solved again in cost mode, every
    class at that scale, within what is left of the time limit (counted from `began`):

    - at the supported limit where alpha came within the gap of it (the budget buys more than
      the queueing models are tested at), on every config, the budget a row; at the largest
      scale the caps allow that is a hard search for any fleet (two-model-fleet 9 → 57 s for
      0.9%). The plan reports the limit, gap 0.
    - else at alpha, where only a cheaper fleet is kept, so the budget holds without its row.
      Without it a program of several models or periods (no tiers) falls apart into blocks
      (formulation/blocks.py): there cost mode's own solve, on every config, block by block,
      each block choosing its configs, where the time left lets each answer (LATE_SECONDS a
      block over the workers: the large benchmark instance's 138 blocks took 9 s under a
      limit of 1 s). One presolve of the whole program, choosing the configs instead, built
      its LP in 10.4 s on the medium benchmark instance (`--budget 150 --time-limit 20`) and
      ran out of time: 149.88 $/h, where the blocks give 141.61.
    - in one block, on the configs the throughput plan uses and those the cost-mode presolve
      chose its incumbent among, in half of the time left (its LP's over every config and the
      cheapest alone: fuzz seed 181's throughput plan, on its own configs, cost 20% more than
      one on others at the same scale).

    Where the limit is spent already, or leaves the blocks too little, nothing is solved: the
    plan's GPUs are trimmed to what its replicas need (`_trimmed`). Below the limit the plan
    keeps alpha's bound and gap; where no cheaper fleet is found, the throughput plan stands."""
    if time_spent(options, began):
        return _trimmed(data, solved)
    left = seconds_left(options, began)
    options = time_left(options, began)
    started = time.perf_counter()
    limit = data.demand_scale_limit
    alpha = solved.solution.alpha
    at_limit = limit is not None and alpha >= limit * (1 - options.mip_gap - 1e-9)
    scale = limit if at_limit else alpha
    program = data.at_scale(scale)
    used = list(range(len(data.configs)))
    unbudgeted = dataclasses.replace(program, budget_per_hour=None)
    blocks = len(block_parts(unbudgeted))
    if not at_limit and blocks > 1:
        if left is not None and left < LATE_SECONDS * blocks / min(options.jobs, blocks):
            return _trimmed(data, solved)
        program = unbudgeted
    elif not at_limit:
        presolved = presolve(program, time_share(options, CHOOSING_SHARE)).incumbent
        chosen = set() if presolved is None else set(presolved.configs)
        used = sorted({k for (k, _), n in solved.solution.x.items() if n > 0.5} | chosen)
        program = program.restricted(used, bounds={})
    cheapest = solve_program(program, time_left(options, started)).solution
    if cheapest is None or (
        not at_limit and cheapest.cost_per_hour >= solved.solution.cost_per_hour * (1 - 1e-9)
    ):
        return solved
    cheapest.alpha = scale
    cheapest.x = {(used[k], t): n for (k, t), n in cheapest.x.items()}
    cheapest.r = {(c, used[k], t): rate for (c, k, t), rate in cheapest.r.items()}
    outcome = solved.outcome
    if at_limit:
        outcome = dataclasses.replace(outcome, objective=limit, bound=limit, gap=0.0)
    return dataclasses.replace(solved, solution=cheapest, outcome=outcome)


CHOOSING_SHARE = 0.5
"""Of what is left of the time limit for the cost-mode solve at the scale a throughput plan
serves, the share of the presolve that chooses the configs it may use."""


def _trimmed(data: ProgramData, solved: Solved) -> Solved:
    """The throughput plan with its GPUs trimmed to what its replicas need, at the tiers that
    cost least (`tiers.cheapest_tiers`), where it is cheaper: HiGHS stops on the scale, its
    GPU counts free below the budget (a plan's GPUs no pool uses, the cost's weight far below
    the gap). Arithmetic, where the limit is spent, or leaves too little, before the cost-mode
    solve at the scale."""
    solution = solved.solution
    replicas = {key: round(n) for key, n in solution.x.items() if round(n)}
    fleet = cheapest_tiers(data, replicas)
    trimmed = dataclasses.replace(
        solution,
        gpus=fleet.gpus,
        reserved=fleet.reserved,
        on_demand=fleet.on_demand,
        spot=fleet.spot,
    )
    finish(trimmed, data)
    if trimmed.cost_per_hour >= solution.cost_per_hour * (1 - 1e-9):
        return solved
    return dataclasses.replace(solved, solution=trimmed)


def _demand_scale_limit(instance: Instance) -> float | None:
    """The largest scale of the stated demand that keeps every workload's rate at the peak
    within the supported range (instance.RANGES), where a budget would buy more."""
    peak = max(instance.demand_profile.multipliers) if instance.demand_profile else 1.0
    busiest = max((w.rate for w in instance.workloads if w.rate is not None), default=0.0)
    return RANGES["requests_per_s"][1] / (busiest * peak) if busiest > 0 else None


def _tiers(pricing: Pricing | None) -> Tiers | None:
    if pricing is None:
        return None
    return Tiers(
        pricing.reserved_price_factor, pricing.spot_price_factor, pricing.spot_max_fraction
    )


def explain_limits(data: ProgramData, options: SolveOptions, began: float) -> str:
    """Every class has a config, so the limits block: conflict.py names the caps, whole nodes or
    budget in conflict and sizes the fix by the cheapest fleet without them, within what is
    left of the time limit since `began`."""
    from fleetopt.conflict import explain_conflict

    def solve(loosened: ProgramData, share: SolveOptions) -> Solution | None:
        return solve_program(loosened, share).solution

    return explain_conflict(data, lambda: build_model(data), options, began, solve)
