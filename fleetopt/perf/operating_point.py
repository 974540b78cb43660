"""Operating points of a replica and, for each, what one request/s of a class uses of each resource.

An operating point fixes the step-time budget `step_s` and the prefill chunk `chunk_tokens`, the
most prompt compute one step carries. On a decode or colocated replica `step_s` bounds the mean
step, which sets the throughput (Little's law); a colocated step that carries a full chunk may
take longer, by at most the chunk's own time (`chunk_step_s`), and that longest step is what
the TTFT counts and the TPOT target must hold. At a fixed point all of a replica's limits are
linear in the routed request rates (docs/formulation.md §3):

    Σ_c usage[c][resource] · r_c  ≤  capacity[resource] · replicas

Little's law gives the sequences in flight: n_c = r_c · output_c · step_s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

from fleetopt.perf.batch_noise import batch_variance_ratio
from fleetopt.perf.queueing import (
    NO_QUEUEING,
    SERVICE_CV2,
    PoolCurve,
    Target,
    Waits,
    max_load_between,
    pool_curve,
    pooled_load,
    sure_misses,
)
from fleetopt.perf.replica import ACTIVATION_RESERVE_GB, Replica

PREFILL = "prefill_compute"
DECODE_STEP = "decode_step"
LONGEST_STEP = "longest_step"
BATCH = "batch_slots"
KV = "kv_memory"
KV_OUT = "kv_transfer_out"
KV_IN = "kv_transfer_in"
HOST = "host"
PROFILE = "measured_capacity"

RESOURCE_LABELS = {
    PREFILL: "prefill compute",
    DECODE_STEP: "step time",
    LONGEST_STEP: "step with a chunk",
    BATCH: "batch slots",
    KV: "KV memory",
    KV_OUT: "KV transfer (send)",
    KV_IN: "KV transfer (receive)",
    HOST: "host (tokens/s)",
    PROFILE: "measured capacity",
}


@dataclass(frozen=True)
class RequestShape:
    """What the cost model needs of a request class: mean lengths for throughput, lengths at
    the SLO percentile for latency, and the targets (None = no target)."""

    input_mean: float
    output_mean: float
    input_tail: float
    output_tail: float
    ttft_s: float | None
    tpot_s: float | None
    miss_share: float = 0.01
    """Share of requests allowed to miss the targets: 1 − percentile/100."""
    decode_network_bytes_per_s: float | None = None
    """Slowest scale-out bandwidth of a decode replica the class may be sent to: prefill and
    decode pools are chosen independently, so a prefill pool's TTFT assumes the slowest."""
    output_shortest: float = 2.0
    """Shortest output to plan for: on a decode pool its TPOT carries the wait to join a step."""
    input_longest: float = 0.0
    output_longest: float = 0.0
    """The longest lengths stated (max where given): every replica a class is routed to must
    hold one such sequence, whatever the SLO percentile."""
    input_moments: tuple[float, ...] = ()
    """E[L], E[L²], E[L³], E[L⁴] of the prompt lengths (empty: every prompt at the mean), for
    the spread of their compute (`service_cv2`)."""
    output_moments: tuple[float, ...] = ()
    """E[O], E[O²], E[O³], E[O⁴] of the output lengths (empty: every output at the mean), for
    the spread of the KV cache the sequences reserve (`reservation_cv2`)."""
    input_cv2: float = 0.0
    """Squared coefficient of variation of the prompt lengths (0: every prompt at the mean):
    the mean prompt's compute (`prompt_s`) counts the attention of their spread."""
    output_cv2: float = 0.0
    """Squared coefficient of variation of the output lengths (0: every output at the mean): a
    long output stays in the batch longer, so the batch holds more than the mean context."""
    input_bins: tuple[tuple[float, float], ...] = ()
    """Prompt lengths by share of requests for the TTFT queue: (upper probability, length),
    each bin's requests at its longest length (workload/lengths.py `tail_bins`); empty: every
    prompt at `input_tail`."""
    output_steps: tuple[tuple[float, float], ...] = ()
    """The output lengths as (share of requests, length) for the batch's swings
    (perf/batch_noise.py); empty: every output at `output_mean`."""
    mean_tpot: bool = False
    """The TPOT is a measured mean (a benchmark's mean TPOT), which the mean step meets, not a
    target every request must meet, which a colocated point holds on its longest step."""

    def prompt_s(self, replica: Replica) -> float:
        """Mean compute time of the class's prompts on the replica, attention included."""
        return replica.mean_prompt_compute_s(self.input_mean, self.input_cv2)

    def service_cv2(self, replica: Replica) -> float:
        """Squared coefficient of variation of the prompts' compute on the replica, which the
        prefill queue takes for its service times (Allen–Cunneen); never below SERVICE_CV2.
        Attention makes a prompt's compute c₁·L + c₂·L², so long prompts spread it more than
        their lengths: c₂ is half the attention time of a token pair and c₁ what the compute
        of the mean prompt leaves (the roofline's own c₁; on a measured curve, as in
        `prompt_s`, its time at the mean with the roofline's attention for the spread)."""
        if not self.input_moments:
            return SERVICE_CV2
        m1, m2, m3, m4 = self.input_moments
        c2 = replica.attention_s_per_pair / 2
        c1 = replica.prompt_compute_s(m1) / m1 - c2 * m1
        mean = c1 * m1 + c2 * m2
        second = c1**2 * m2 + 2 * c1 * c2 * m3 + c2**2 * m4
        return max(SERVICE_CV2, second / mean**2 - 1)

    @property
    def walk_tokens(self) -> float:
        """The context the class's long sequences reach in a batch: a percentile-length
        request at its last token (where attention walks each context alone, the step lasts at
        least the longest one's walk: `Replica.walk_tokens`)."""
        return self.input_tail + self.output_tail

    def longest_sequence(self, decodes: bool) -> float:
        prompt = max(self.input_longest, self.input_tail)
        return prompt + (max(self.output_longest, self.output_tail) if decodes else 0.0)

    @property
    def output_mix(self) -> tuple[tuple[float, float], ...]:
        return self.output_steps or ((1.0, self.output_mean),)

    @property
    def reserved_tokens(self) -> float:
        """KV a sequence in the batch holds, on average over the batch: its prompt and its
        whole output, reserved at admission so a running sequence is never preempted. A
        sequence stays O steps, so the batch weighs sequences by their output (Little's law
        per length): E[O·(L + O)]/E[O] = L̄ + Ō·(1 + cv²_O), prompt and output independent."""
        return self.input_mean + self.output_mean * (1 + self.output_cv2)

    @property
    def reservation_cv2(self) -> float:
        """Squared coefficient of variation of the KV a sequence in the batch holds, s = L + O,
        weighed by output as `reserved_tokens` is: E[O·s²]/E[O] = E[L²] + 2·L̄·E[O²]/E[O] +
        E[O³]/E[O] over `reserved_tokens`², less 1. The cache holds a sum of such sizes, whose
        swings grow with their spread: one prompt of 60,000 tokens fills the room of seven of
        8,000 (`admission_headroom`)."""
        l1, o1 = self.input_mean, self.output_mean
        l2 = self.input_moments[1] if self.input_moments else l1**2 * (1 + self.input_cv2)
        o2 = o1**2 * (1 + self.output_cv2)
        o3 = self.output_moments[2] if self.output_moments else o1**3
        second = l2 + 2 * l1 * o2 / o1 + o3 / o1
        return max(0.0, second / self.reserved_tokens**2 - 1)

    @property
    def decode_context(self) -> float:
        """Mean context of a sequence in the batch, which attention reads each step: its prompt
        plus the output so far, weighed by output as above: E[O·(L + O/2)]/E[O]
        = L̄ + Ō·(1 + cv²_O)/2 (the prompt plus half the output where outputs do not vary)."""
        return self.input_mean + self.output_mean * (1 + self.output_cv2) / 2


@dataclass(frozen=True)
class OperatingPoint:
    role: str  # colocated | prefill | decode
    step_s: float
    chunk_tokens: int  # 0 for decode
    longest_step_s: float | None = None
    """Colocated: the budget of a step that carries a full chunk, the TPOT the point holds
    (a row of its own); None: no TPOT to hold, such a step takes at most step_s + the chunk."""

    @property
    def does_prefill(self) -> bool:
        return self.role in ("colocated", "prefill")

    @property
    def does_decode(self) -> bool:
        return self.role in ("colocated", "decode")


@dataclass(frozen=True)
class Limits:
    """Engine limits that bound every operating point (from `serving`)."""

    max_prefill_utilization: float
    max_num_seqs: int
    gpu_memory_utilization: float


def walker(replica: Replica, role: str, walk_tokens: float) -> Replica:
    """The replica whose steps walk sequences of up to `walk_tokens` (`Replica.walk_tokens`);
    a prefill replica's steps hold no decoding sequence."""
    return replica if role == "prefill" else replica.at_walk(walk_tokens)


def prefill_step_s(replica: Replica, chunk_tokens: int) -> float:
    """Step time of a dedicated prefill replica processing a full chunk."""
    return replica.step_s(prefill_tokens=chunk_tokens)


def chunk_extra_s(replica: Replica, chunk_tokens: int) -> float:
    """What a full prefill chunk adds to a decode step: its compute and its all-reduce (the
    step is a sum of its kernels' times, perf/replica.py)."""
    return replica.chunk_compute_s(chunk_tokens) + chunk_tokens * replica.allreduce_s_per_token


def chunk_step_s(replica: Replica, op: OperatingPoint) -> float:
    """The longest step of the point, the one that carries a full prefill chunk: the prompt's
    steps in its TTFT. Colocated, the mean step is at most `step_s`, so the step without a
    chunk is too, and a step with a full one at most step_s + the chunk's time."""
    if op.role != "colocated":
        return op.step_s
    after_mean = op.step_s + chunk_extra_s(replica, op.chunk_tokens)
    return after_mean if op.longest_step_s is None else min(op.longest_step_s, after_mean)


def capacity(replica: Replica, op: OperatingPoint, limits: Limits) -> dict[str, float]:
    """Per-replica capacity of each resource at the point; empty if the point is impossible."""
    caps: dict[str, float] = {}
    tau, chunk = op.step_s, op.chunk_tokens
    if op.does_prefill:  # a mean step of at most τ: at least 1/τ chunks per second
        caps[PREFILL] = limits.max_prefill_utilization * replica.chunk_compute_s(chunk) / tau
    if op.does_decode:  # the mean step: a colocated replica's prompts are in `usage`
        left = tau - replica.floor_s
        kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)
        if left <= 0 or kv_tokens <= 0:
            return {}
        caps[DECODE_STEP] = left / tau
        if op.role == "colocated" and op.longest_step_s is not None:
            # the decode batch of the mean step, with a full chunk, within the longest step
            # (the TPOT the point states: `chunk_step_s`)
            longest = chunk_step_s(replica, op) - replica.floor_s
            longest -= chunk_extra_s(replica, chunk)
            if longest <= 0:
                return {}
            caps[LONGEST_STEP] = longest / tau
        caps[BATCH] = float(limits.max_num_seqs)
        caps[KV] = kv_tokens
        if replica.host_s_per_token > 0:  # the host's share of its time: tokens · t_host
            caps[HOST] = 1.0
    if op.role == "prefill":
        caps[KV_OUT] = replica.kv_transfer_bytes_per_s / 1e9  # GB/s: keeps the matrix well scaled
    if op.role == "decode":
        caps[KV_IN] = replica.kv_transfer_bytes_per_s / 1e9
    return caps


def capacity_gap(replica: Replica, op: OperatingPoint) -> Blocker:
    """Why a point has no capacity (`capacity` is empty): its step budget is below the
    shortest step it could take."""
    ms = 1e3
    floor = replica.floor_s
    if op.longest_step_s is not None and op.role == "colocated":
        full = floor + chunk_extra_s(replica, op.chunk_tokens)
        if full >= op.longest_step_s:
            weights = replica.weight_read_s  # 0 for measured curves, whose steps include it
            of_which = f" (weights {weights * ms:,.1f} ms)" if weights > 0 else ""
            return Blocker(
                "tpot",
                f"a step with a {op.chunk_tokens:,}-token prefill chunk takes at least "
                f"{full * ms:,.1f} ms{of_which}, more than the {op.longest_step_s * ms:,.1f} ms TPOT",
                full / op.longest_step_s,
            )
    return Blocker(
        "tpot",
        f"a step budget of {op.step_s * ms:,.1f} ms leaves nothing after the fixed time and the "
        f"weight read ({floor * ms:,.1f} ms)",
        floor / op.step_s,
    )


def usage(replica: Replica, op: OperatingPoint, shape: RequestShape) -> dict[str, float]:
    """Resources one request/s of the class takes at the point. On a colocated replica the
    prompt's compute and all-reduce count in the mean step at the rate prompts arrive: steps
    carry partial chunks or none, and the step time is linear in what they carry."""
    use: dict[str, float] = {}
    if op.does_prefill:
        use[PREFILL] = shape.prompt_s(replica)
    if op.does_decode:
        out = shape.output_mean
        batch, prompt = step_work_s(replica, op, shape)
        use[DECODE_STEP] = batch + prompt
        if op.longest_step_s is not None:
            use[LONGEST_STEP] = batch
        use[BATCH] = out * op.step_s
        use[KV] = out * op.step_s * shape.reserved_tokens
        if replica.host_s_per_token > 0:
            use[HOST] = out * replica.host_s_per_token
    if op.role == "prefill":
        use[KV_OUT] = shape.input_mean * replica.kv_bytes_per_token / 1e9
    if op.role == "decode":
        use[KV_IN] = shape.input_mean * replica.kv_bytes_per_token / 1e9
    return use


def step_work_s(replica: Replica, op: OperatingPoint, shape: RequestShape) -> tuple[float, float]:
    """Step time one request of the class adds on a decoding replica: (its decode steps' share
    of the batch, its prompt's compute and all-reduce where the replica prefills it too)."""
    comm = replica.allreduce_s_per_token
    batch = shape.output_mean * (replica.decode_s_per_token(shape.decode_context) + comm)
    if op.role != "colocated":
        return batch, 0.0
    return batch, shape.prompt_s(replica) + shape.input_mean * comm


@dataclass(frozen=True)
class Latency:
    ttft_s: float | None  # None: this role does not set the TTFT
    tpot_s: float | None  # None: this role does not set the TPOT


def latency(replica: Replica, op: OperatingPoint, shape: RequestShape) -> Latency:
    """TTFT and TPOT of a tail-length request at the point, queueing excluded. A prompt that
    arrives mid-step waits for that step to end before its first chunk runs: one step more.
    The TPOT is held step by step, at the longest step (`chunk_step_s`): a short output may
    run entirely in steps that carry prompt chunks, so the mean step does not bound its TPOT."""
    ttft = tpot = None
    if op.does_prefill:
        ttft = prompt_ttft_s(replica, op, shape, shape.input_tail)
    if op.does_decode:
        step = op.step_s if shape.mean_tpot else chunk_step_s(replica, op)
        tpot = step * tpot_per_step(op.role, shape)
    return Latency(ttft, tpot)


def prompt_ttft_s(
    replica: Replica, op: OperatingPoint, shape: RequestShape, prompt_tokens: float
) -> float:
    """TTFT of a prompt of this length at a prefilling point, queueing excluded: the step in
    progress, the prompt's own chunk steps, and on a prefill pool the KV transfer to the
    slowest decode replica the class may be sent to."""
    steps = replica.chunked_prefill_steps(prompt_tokens, op.chunk_tokens)
    ttft = (steps + 1) * chunk_step_s(replica, op)
    if op.role == "prefill":
        bandwidth = min(
            replica.kv_transfer_bytes_per_s, shape.decode_network_bytes_per_s or math.inf
        )
        ttft += prompt_tokens * replica.kv_bytes_per_token / bandwidth
    return ttft


def tpot_per_step(role: str, shape: RequestShape) -> float:
    """TPOT over the step time. On a decode pool a transferred sequence joins at the next step
    boundary: up to one step more, spread over the O − 1 tokens after the first — worst for
    the shortest output. Colocated, the first token ends a step and the next follows it."""
    if role != "decode":
        return 1.0
    return 1 + 1 / (max(2.0, shape.output_shortest) - 1)


@dataclass(frozen=True)
class Blocker:
    """Why a point may not carry a class: which limit, and how far off in words."""

    kind: str  # weights | memory | ttft | tpot
    message: str
    miss: float = math.inf
    """How far off, as a ratio above 1 (the latency the point gives over the target, what a
    sequence needs over what the cache holds; inf where not measured): the explanation of an
    infeasible class shows the nearest miss of each kind."""


def weights_blocker(replica: Replica, limits: Limits) -> Blocker | None:
    """Why the replica has no KV cache at all (its weights fill the memory it may use), or
    None: then no class and no point may use it."""
    kv_bytes = replica.kv_capacity_bytes(limits.gpu_memory_utilization)
    if kv_bytes > 0:
        return None
    room = max(0.0, (kv_bytes + replica.weight_bytes) / 1e9)
    share = limits.gpu_memory_utilization
    return Blocker(
        "weights",
        f"weights ({replica.weight_bytes / 1e9:,.0f} GB) leave no room for a KV cache in the "
        f"{room:,.0f} GB that {replica.tp} GPU(s) offer ({replica.gpu.spec.memory_gb:,.0f} GB "
        f"each at serving.gpu_memory_utilization {share:g}, less {ACTIVATION_RESERVE_GB:g} GB "
        "each for activations)",
    )


def memory_blocker(
    replica: Replica, shape: RequestShape, decodes: bool, limits: Limits
) -> Blocker | None:
    """Why the replica's KV cache cannot hold the class's longest sequence, or None."""
    kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)
    longest = shape.longest_sequence(decodes)
    if kv_tokens < longest:
        return Blocker(
            "memory",
            f"KV cache holds {kv_tokens:,.0f} tokens, fewer than one {longest:,.0f}-token sequence",
            longest / max(kv_tokens, 1e-9),
        )
    return None


def unqueued_misses(replica: Replica, op: OperatingPoint, shape: RequestShape) -> float:
    """Share of the class's requests that miss its TTFT at this point however idle the pool:
    the prompts whose prefill alone takes longer. They spend the class's miss share before any
    queueing (perf/queueing.py, `sure_misses`); 0 where the point sets no TTFT."""
    if shape.ttft_s is None or not op.does_prefill:
        return 0.0
    return sure_misses(by_share(wait_budgets_s(replica, op, shape)))


def ineligibility(
    replica: Replica, op: OperatingPoint, shape: RequestShape, limits: Limits
) -> Blocker | None:
    """Why the point may not serve the class, or None if it may."""
    if blocker := memory_blocker(replica, shape, op.does_decode, limits):
        return blocker
    lat = latency(replica, op, shape)
    if blocker := _over_target("ttft", lat.ttft_s, shape.ttft_s, 0):
        return blocker
    if shape.ttft_s is not None and lat.ttft_s is not None:
        late = unqueued_misses(replica, op, shape)
        if late >= shape.miss_share:
            return Blocker(
                "ttft",
                f"the longest {late:.2%} of prompts (up to {shape.longest_sequence(False):,.0f} "
                f"tokens) miss the {shape.ttft_s * 1e3:,.0f} ms TTFT even unqueued, more than "
                f"the {shape.miss_share:.2%} allowed",
                late / shape.miss_share,
            )
    return _over_target("tpot", lat.tpot_s, shape.tpot_s, 1)


def _over_target(
    kind: str, seconds: float | None, target_s: float | None, digits: int
) -> Blocker | None:
    """A latency over its target (beyond rounding), in ms to `digits` places."""
    if seconds is None or target_s is None or seconds <= target_s * (1 + 1e-9):
        return None
    return Blocker(
        kind,
        f"{kind.upper()} {seconds * 1e3:,.{digits}f} ms > target {target_s * 1e3:,.{digits}f} ms",
        seconds / target_s,
    )


def throughput_step_s(
    replica: Replica,
    role: str,
    chunk_tokens: int,
    shape: RequestShape,
    limits: Limits,
    longest_step_s: float | None = None,
) -> float:
    """The step budget at which one replica carries the most of this class alone.

    At step τ the rate one replica carries is bounded by two kinds of limit (formulation §3):
    batch slots, KV memory, a colocated replica's prefill chunks and its longest step (the
    batch with a full chunk within `longest_step_s`) give r ≤ α/τ (longer steps, fewer of
    them); the step time left after the fixed part and the weight read gives r ≤ (τ − f)/(τ·β)
    (longer steps, more room). The best τ is where the two meet: τ* = f + α_min·β.
    """
    op = OperatingPoint(role, 1.0, chunk_tokens, longest_step_s)
    use = usage(replica, op, shape)
    kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)
    out = shape.output_mean
    alpha = min(limits.max_num_seqs / out, kv_tokens / (out * shape.reserved_tokens))
    if role == "colocated":
        chunk_s = replica.chunk_compute_s(chunk_tokens)
        alpha = min(alpha, limits.max_prefill_utilization * chunk_s / use[PREFILL])
        if longest_step_s is not None and use[LONGEST_STEP] > 0:  # measured: a batch may be free
            left = longest_step_s - replica.floor_s
            alpha = min(alpha, (left - chunk_extra_s(replica, chunk_tokens)) / use[LONGEST_STEP])
    return replica.floor_s + alpha * use[DECODE_STEP]


def prefill_service_s(replica: Replica, op: OperatingPoint, shape: RequestShape) -> float:
    """Mean time a prompt of the class occupies a replica's prefill capacity (one chunk of
    compute R per chunk step)."""
    return (
        shape.prompt_s(replica)
        * chunk_step_s(replica, op)
        / replica.chunk_compute_s(op.chunk_tokens)
    )


def wait_budget_s(replica: Replica, op: OperatingPoint, shape: RequestShape) -> float | None:
    """Time a tail prompt may queue before its TTFT breaks; None without a TTFT target."""
    if shape.ttft_s is None:
        return None
    return shape.ttft_s - latency(replica, op, shape).ttft_s


def wait_budgets_s(
    replica: Replica, op: OperatingPoint, shape: RequestShape
) -> tuple[tuple[float, float], ...]:
    """(upper probability, seconds a prompt may queue) for each of the class's length bins: a
    short prompt may wait longer than a tail one before its TTFT breaks. Neighbouring bins
    whose prompts take as many steps wait alike and are merged (a plain mean is one bin)."""
    assert shape.ttft_s is not None
    budgets: list[tuple[float, float]] = []
    for p, length in shape.input_bins or ((1.0, shape.input_tail),):
        wait = shape.ttft_s - prompt_ttft_s(replica, op, shape, length)
        if budgets and budgets[-1][1] == wait:
            budgets.pop()
        budgets.append((p, wait))
    return tuple(budgets)


def by_share(bins: tuple[tuple[float, float], ...]) -> Waits:
    """(upper probability, value) bins as (share of requests, value)."""
    lowers = (0.0, *(p for p, _ in bins[:-1]))
    return tuple((p - low, value) for (p, value), low in zip(bins, lowers, strict=True))


def latency_bound(shape: RequestShape) -> bool:
    """The class has a TTFT or TPOT target: its requests may not wait long for a slot."""
    return shape.ttft_s is not None or shape.tpot_s is not None


def batch_slots(replica: Replica, shape: RequestShape, limits: Limits) -> int:
    """The sequences a replica holds were they all of this class: the engine's batch limit, or
    its KV cache's (`kv_slots`), whichever is fewer."""
    return min(limits.max_num_seqs, kv_slots(replica, shape, limits))


def kv_slots(replica: Replica, shape: RequestShape, limits: Limits) -> int:
    """The sequences of this class a replica's KV cache holds: its tokens over the KV each
    reserves at admission."""
    kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)
    return int(kv_tokens // shape.reserved_tokens)


def admission_headroom(
    replica: Replica,
    op: OperatingPoint,
    shapes: list[RequestShape],
    limits: Limits,
    known: dict | None = None,
    pooled: int = 1,
) -> list[float]:
    """Each class's share of a replica's batch slots and KV cache its sequences may fill on
    average, were it alone, in a pool of `pooled` such replicas; in a mix each class's
    sequences count 1/h of a slot and of their KV (`admitted_usage`), between the single-class
    points.

    Each slot is a server and a sequence holds one for its whole decode, so admission is a
    queue of S slots (service = the output's steps); requests should not wait more than one
    step for a slot beyond the miss share. With a fixed step the batch is a Poisson count and
    Erlang C (M/M/S) gives the largest mean occupancy: with S in the hundreds ~85–90%. The step
    grows with the batch and the prompts, which swings the batch F times as widely
    (perf/batch_noise.py); such a queue behaves as S/F slots at 1/F of the load (the
    Halfin–Whitt scale, the same (S − n̄)/√(F·n̄)), so the headroom is F·load(S/F)/S, F the
    class's own at the most a replica carries of it alone (`_alone`). The engine's batch limit
    gives S = max_num_seqs. The KV cache gives S = the whole sequences at the mean reservation
    it holds, but it holds a sum of reservations of different sizes, whose variance in units of
    the mean is F + cv² of the sizes (`RequestShape.reservation_cv2`: the sizes' own spread on
    top of the count's), so its F is that. The headroom is the lesser of the two. The slots,
    the spread, the wait (one step of the longest output) and the miss share are the
    strictest of the latency-bound classes the replica may carry. They share one queue, first
    come first served, so a class without latency targets beside them keeps the same headroom
    (its sequences would fill the slots the others wait for); only a replica of such classes
    alone fills every slot.

    The router sends a request to a replica of the pool with a free slot (among those of the
    least prompt work ahead: simulate/router.py), so n replicas of S slots act as one queue of
    n·S slots, each replica at the same load: the headroom is F·load(n·S/F)/(n·S), which rises
    with n (approximate: a request joins one replica's queue, not the pool's; measured in
    docs/latency.md).

    `known`: the headrooms found so far at this replica and point (one dict across its
    queueing levels, whose class sets differ but often share the slots, wait and miss share)."""
    timed = [s for s in shapes if latency_bound(s)]
    if not timed:
        return [1.0] * len(shapes)
    cache_slots = min(kv_slots(replica, s, limits) for s in timed)
    if cache_slots < 1:
        return [0.0] * len(shapes)
    kv_spread = max(s.reservation_cv2 for s in timed)
    waits = ((1.0, 1 / max(s.output_mean for s in timed)),)
    tail = min(s.miss_share for s in timed)

    def at(shape: RequestShape, rate: float) -> float:
        swing = batch_swing(replica, op, [(shape, rate)])
        # F·load(S/F)/S is load(m)/m at m = S/F, which never falls as m grows (load is convex
        # through 0): the lesser headroom is the one at the fewer scaled slots
        pairs = ((limits.max_num_seqs, swing), (cache_slots, swing + kv_spread))
        slots, spread = min(pairs, key=lambda pair: pair[0] / pair[1])
        slots *= pooled
        return spread * max_load_between(slots / spread, waits, tail) / slots

    found = {} if known is None else known
    key = (cache_slots, kv_spread, waits, tail, pooled)
    for shape in shapes:
        if (shape, *key) not in found:
            found[shape, *key] = _alone(replica, op, shape, limits, at)
    return [found[s, *key] for s in shapes]


SWING_BISECTIONS = 8


def _alone(
    replica: Replica,
    op: OperatingPoint,
    shape: RequestShape,
    limits: Limits,
    headroom_at: Callable[[RequestShape, float], float],
) -> float:
    """The headroom h of a replica carrying this class alone at the most it can: the rate is
    the lesser of its other rows' bound (the mean step, the step with a chunk, prefill
    compute) and the slots' (and KV's) at h, and the headroom is that rate's, so h = g(h), g
    decreasing (a higher rate swings wider). If the headroom at the other rows' bound leaves
    them binding, that is h; otherwise h is the fixed point, bisected between that headroom
    and the slots' bound (the lower end is kept: conservative)."""
    use = usage(replica, op, shape)
    others = {k: v for k, v in capacity(replica, op, limits).items() if k not in (BATCH, KV)}
    by_rows = max_rate(others, use)[0]
    if not math.isfinite(by_rows):
        return headroom_at(shape, 0.0)
    kv_tokens = replica.kv_capacity_tokens(limits.gpu_memory_utilization)

    def by_slots(h: float) -> float:
        return min(
            limits.max_num_seqs / admitted_usage(replica, op, shape, h, BATCH, limits),
            kv_tokens / admitted_usage(replica, op, shape, h, KV, limits),
        )

    low, high = headroom_at(shape, by_rows), 1.0
    if by_slots(low) >= by_rows:  # at that headroom the other rows bind before the slots
        return low
    if headroom_at(shape, by_slots(high)) >= high:
        return high
    for _ in range(SWING_BISECTIONS):
        mid = (low + high) / 2
        low, high = (mid, high) if headroom_at(shape, by_slots(mid)) >= mid else (low, mid)
    return low


def admitted_usage(
    replica: Replica,
    op: OperatingPoint,
    shape: RequestShape,
    headroom: float,
    resource: str,
    limits: Limits,
) -> float:
    """What one request/s of the class takes of the slots (BATCH) or the KV cache (KV) with
    its admission headroom h, counting its sequences at the replica's mean step τ̄, not the
    budget τ. The step is a sum linear in its load, τ̄ = f/(1 − Σ r·w) (f the floor, w a
    request's step work), so n̄/h ≤ S for n̄ = Σ r·O·τ̄ is the linear row
    Σ r·(f·O/h + S·w) ≤ S, with S the slots (or the KV tokens, each sequence counting its
    reserved tokens). The mean-step row keeps τ̄ ≤ τ, so this is never looser than counting at
    τ. A measured step with no fixed part counts at τ."""
    per_seq = 1.0 if resource == BATCH else shape.reserved_tokens
    whole = (
        float(limits.max_num_seqs)
        if resource == BATCH
        else replica.kv_capacity_tokens(limits.gpu_memory_utilization)
    )
    sequences = shape.output_mean * per_seq / headroom
    if replica.floor_s <= 0:
        return sequences * op.step_s
    return sequences * replica.floor_s + whole * sum(step_work_s(replica, op, shape))


def batch_swing(
    replica: Replica, op: OperatingPoint, loads: list[tuple[RequestShape, float]]
) -> float:
    """Var/mean of a replica's batch at these per-replica rates (perf/batch_noise.py): the
    shares of the step its batch and its prompts take, the classes' outputs mixed by rate."""
    total = sum(r for _, r in loads)
    if total <= 0:
        return 1.0
    batch_share = prompt_share = second = 0.0
    outputs: list[tuple[float, float]] = []
    for shape, rate in loads:
        batch, prompt = step_work_s(replica, op, shape)
        batch_share += rate * batch
        prompt_share += rate * prompt
        second += rate * shape.input_mean**2 * (1 + shape.input_cv2)
        outputs += [(rate / total * share, length) for share, length in shape.output_mix]
    mean_prompt = sum(r * s.input_mean for s, r in loads) / total
    prompt_cv2 = second / total / mean_prompt**2 - 1 if mean_prompt > 0 else 0.0
    return batch_variance_ratio(outputs, batch_share, prompt_share, prompt_cv2)


def step_quantile(shapes: list[RequestShape]) -> float | None:
    """z of the strictest TPOT percentile among the classes (None: no TPOT target to hold)."""
    misses = [s.miss_share for s in shapes if s.tpot_s is not None]
    return NormalDist().inv_cdf(1 - min(misses)) if misses else None


def own_sequence_s(costs: list[tuple[RequestShape, float]]) -> float:
    """The step time a TPOT-bound request's own sequence adds to the batch it sees: the largest
    per-sequence β among the classes with a TPOT target (`costs`: each class's shape and β)."""
    return max((beta for shape, beta in costs if shape.tpot_s is not None), default=0.0)


def with_latency_margins(
    replica: Replica,
    op: OperatingPoint,
    shapes: dict[str, RequestShape],
    limits: Limits,
    caps: dict[str, float],
    usages: dict[str, dict[str, float]],
    known: dict | None = None,
    pooled: int = 1,
) -> tuple[dict[str, float], dict[str, dict[str, float]]] | None:
    """The point's capacities and usages with the margins that hold latency percentiles, not
    only means (docs/latency.md); None if no margin leaves room to carry anything.

    - Admission: each class's sequences count 1/h of a slot and of their KV, h its Erlang C
      headroom (`admission_headroom`), at the mean step the load gives (`admitted_usage`).
    - TPOT: sequences in flight fluctuate around their Little's-law mean n like a Poisson count,
      so a step's batch-dependent time Σ n_c·β_c has variance Σ n_c·β_c². The step must fit τ
      at the class percentile: Σ n_c·β_c + z·√(Σ n_c·β_c²) ≤ S, S the step time left for the
      batch. √v ≤ (v + v0)/(2√v0) for any v0 > 0 turns it into a linear row; with v0 = S·β_max
      (the variance of a full batch of the costliest class), every β_c grows by z·β_c/(2√v0)
      and S shrinks by z·√v0/2. This is on the row that holds the TPOT: a colocated point's
      longest step (its batch with a full chunk) where it has one, else the mean step, where a
      colocated class's β carries its prompts' compute per output token.
    - The request's own sequence: a request runs every step of its life beside a batch that
      is, on average, the mean one, so it sees the mean plus its own β. At a high percentile
      z·√v0/2 covers that; near the median it does not (a bucket of very long prompts
      allotted p54.5), so S shrinks by the larger of z·√v0/2 and the largest β of the
      TPOT-bound classes (`own_sequence_s`; a row with both charges implies each one's).

    `known`, `pooled`: as for `admission_headroom`."""
    caps = dict(caps)
    usages = {name: dict(use) for name, use in usages.items()}
    if not op.does_decode:
        return caps, usages
    headrooms = admission_headroom(replica, op, list(shapes.values()), limits, known, pooled)
    for (name, shape), headroom in zip(shapes.items(), headrooms, strict=True):
        if headroom <= 0:
            return None
        for resource in (BATCH, KV):
            usages[name][resource] = admitted_usage(replica, op, shape, headroom, resource, limits)
    z = step_quantile(list(shapes.values()))
    if z is None:
        return caps, usages
    z = max(z, 0.0)  # below the median, the mean step
    # The TPOT is held by the longest step where the point has that row, else by the mean step
    for resource in [LONGEST_STEP] if LONGEST_STEP in caps else [DECODE_STEP]:
        budget = caps[resource] * op.step_s  # S: step time left for the batch
        beta = {n: usages[n][resource] / shapes[n].output_mean for n in usages}
        root = math.sqrt(budget * max(beta.values()))
        if root <= 0:  # the batch takes no step time (a measured grid flat in batch size)
            continue
        own = own_sequence_s([(shapes[n], beta[n]) for n in usages])
        caps[resource] -= max(z * root / 2, own) / op.step_s
        if caps[resource] <= 0:
            return None
        for name in usages:
            usages[name][resource] *= 1 + z * beta[name] / (2 * root)
    return caps, usages


def queue_curve(
    replica: Replica,
    op: OperatingPoint,
    shapes: list[RequestShape],
    limits: Limits,
    max_replicas: int | None = None,
) -> PoolCurve:
    """Load n replicas at this point carry with every class's TTFT percentile held
    (perf/queueing.py). The mix is unknown here, so the curve is the conservative one: the
    longest mean service time and the most variable prompt compute, each class held to its
    own wait budgets and percentile (perf/queueing.py `pool_curve`)."""
    queue = _prefill_queue(replica, op, shapes, limits)
    if queue is None:
        return NO_QUEUEING
    return pool_curve(
        queue.targets, queue.ceiling, max_replicas, queue.chunk_share, queue.longest, queue.cv2
    )


def queue_load(
    replica: Replica, op: OperatingPoint, shapes: list[RequestShape], limits: Limits, replicas: int
) -> float:
    """What `queue_curve` holds `replicas` to, g(n) itself rather than its expansion
    (perf/queueing.py `pooled_load`): verify's measure of a pool."""
    queue = _prefill_queue(replica, op, shapes, limits)
    if queue is None:
        return float(replicas)
    return pooled_load(
        queue.targets, replicas, queue.ceiling, queue.chunk_share, queue.longest, queue.cv2
    )


class PrefillQueue(NamedTuple):
    """The M/G/n queue of `queue_curve`: `pool_curve`'s arguments less the expansion limit."""

    targets: tuple[Target, ...]
    ceiling: float
    chunk_share: float
    longest: float
    cv2: float


def _prefill_queue(
    replica: Replica, op: OperatingPoint, shapes: list[RequestShape], limits: Limits
) -> PrefillQueue | None:
    """The queue of the point's prompts; None where no class has a TTFT target."""
    timed = [s for s in shapes if s.ttft_s is not None]
    if not timed:
        return None
    service = max(prefill_service_s(replica, op, s) for s in shapes)
    targets = []
    for s in timed:
        waits = by_share(wait_budgets_s(replica, op, s))
        targets.append((tuple((share, w / service) for share, w in waits), s.miss_share))
    # A prompt in service runs in chunk steps, longer than the mean step (queueing.carried).
    share = chunk_extra_s(replica, op.chunk_tokens) / op.step_s if op.role == "colocated" else 0.0
    longest = chunk_step_s(replica, op) / op.step_s
    ceiling = limits.max_prefill_utilization
    cv2 = max(s.service_cv2(replica) for s in shapes)  # untimed prompts hold the servers as long
    return PrefillQueue(tuple(targets), ceiling, share, longest, cv2)


def max_rate(caps: dict[str, float], use: dict[str, float]) -> tuple[float, str]:
    """Largest request rate one replica carries of a single class, and the binding resource."""
    best, binding = math.inf, ""
    for resource, cap in caps.items():
        u = use.get(resource, 0.0)
        if u > 0 and cap / u < best:
            best, binding = cap / u, resource
    return best, binding
