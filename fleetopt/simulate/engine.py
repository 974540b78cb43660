"""The replica engines: iteration-level continuous batching, one engine step per event.

Step times come from the token cost model (`Replica.step_parts`). Its parts are linear in the
step's load — decode sequences, their context tokens, prefill tokens, prefill compute — so
`StepModel` reads the coefficients off it once per replica and evaluates a step in a few
multiplications; a test holds it equal to `Replica.step_s`.

For speed an engine keeps aggregate state, not per-sequence state: the number of running decode
sequences n, their total context C (every step adds n), a step counter, and a heap of the step
index at which each sequence finishes. A step touches only the sequences that start or finish.

Per-request data lives in plain lists shared with the simulator (`Ledger`), indexed by request.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush

from fleetopt.perf.replica import Replica

PROBE = 1e6
"""Load at which the linear coefficients are read (large, so rounding is negligible)."""


@dataclass(frozen=True)
class StepModel:
    """step = base + per-sequence + per-context + prefill compute + all-reduce per token + the
    longest sequence's walk: the step model's sum, each part linear in the load (base = fixed
    time + weight read). The walk is the batch's own: the replica is read at walk 0 and each
    step adds its longest running context's walk (`Replica.walk_s_per_token`). The host's time
    per sequence runs beside the step: a step lasts at least that (`Replica.host_s_per_token`)."""

    base_s: float
    s_per_seq: float
    s_per_context: float
    allreduce_s_per_token: float
    s_per_walk: float = 0.0
    host_s_per_seq: float = 0.0

    @classmethod
    def of(cls, replica: Replica) -> StepModel:
        replica = replica.at_walk(0.0)
        base = replica.step_parts()
        seq = replica.step_parts(decode_seqs=PROBE)
        ctx = replica.step_parts(decode_context_tokens=PROBE)
        return cls(
            base_s=base.total_s - base.allreduce_s,
            s_per_seq=(seq.total_s - seq.allreduce_s - base.total_s + base.allreduce_s) / PROBE,
            s_per_context=(ctx.total_s - base.total_s) / PROBE,
            allreduce_s_per_token=(seq.allreduce_s - base.allreduce_s) / PROBE,
            s_per_walk=replica.walk_s_per_token,
            host_s_per_seq=replica.host_s_per_token,
        )

    def step_s(
        self, seqs: int, context: float, tokens: int, compute_s: float, walk: float = 0.0
    ) -> float:
        """A step of `seqs` decode sequences holding `context` tokens, the longest `walk`, plus
        `tokens` prefill tokens whose compute takes `compute_s`."""
        step = (
            self.base_s
            + seqs * self.s_per_seq
            + context * self.s_per_context
            + compute_s
            + (seqs + tokens) * self.allreduce_s_per_token
            + walk * self.s_per_walk
        )
        return max(step, seqs * self.host_s_per_seq)


@dataclass
class Ledger:
    """Per-request lists the engines read and write (index = request id)."""

    input_tokens: list[int]
    output_tokens: list[int]
    prefill_s_per_token: list[float]
    """Compute time per prompt token on the replica that prefills it, L·p(L)/L."""
    prompt_left: list[int]
    first_s: list[float]
    finish_s: list[float]


class Clock:
    """The simulator's event heap of (time, tie-break, handler, arg); handler(time, arg) runs
    when the time comes. Engines push onto it directly (a call less per step)."""

    __slots__ = ("heap", "tick")

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Callable[[float, object], None], object]] = []
        self.tick = itertools.count()

    def at(self, when: float, handler: Callable[[float, object], None], arg: object) -> None:
        heappush(self.heap, (when, next(self.tick), handler, arg))


@dataclass
class Counters:
    """What a replica did, for utilisation, queue and batch figures (differenced over a window)."""

    busy_s: float
    steps: int
    batch_seqs: int
    batch_square: int
    """Σ over steps of the step's sequences squared: the batch's spread."""
    prefill_tokens: int
    decode_tokens: int
    queue_area: float
    """Waiting requests integrated over time (request-seconds)."""
    queue_max: int


class _Engine:
    """Counters and step bookkeeping shared by both kinds of replica."""

    __slots__ = (
        "backlog",
        "batch_seqs",
        "batch_square",
        "busy",
        "busy_s",
        "clock",
        "coefficients",
        "decode_tokens",
        "ledger",
        "prefill_backlog",
        "prefill_tokens",
        "queue_area",
        "queue_max",
        "step_end",
        "step_queue",
        "steps_run",
    )

    def __init__(self, model: StepModel, ledger: Ledger, clock: Clock) -> None:
        self.coefficients = (
            model.base_s,
            model.s_per_seq,
            model.s_per_context,
            model.allreduce_s_per_token,
            model.s_per_walk,
            model.host_s_per_seq,
        )
        self.ledger, self.clock = ledger, clock
        self.busy = False
        self.backlog = 0
        """Outstanding tokens: prompt tokens to prefill + output tokens to decode."""
        self.prefill_backlog = 0
        """Prompt tokens not yet prefilled: the work ahead of a new prompt."""
        self.busy_s = self.queue_area = self.step_end = 0.0
        self.steps_run = self.batch_seqs = self.batch_square = 0
        self.prefill_tokens = self.decode_tokens = 0
        self.queue_max = self.step_queue = 0

    def _run_step(
        self,
        now: float,
        seqs: int,
        context: int,
        tokens: int,
        compute: float,
        queue: int,
        walk: int = 0,
    ) -> None:
        """Count the step and put its end on the clock. The step time is `StepModel.step_s`,
        inlined: this runs once per simulated step."""
        base, per_seq, per_context, allreduce, per_walk, host = self.coefficients
        dt = base + seqs * per_seq + context * per_context + compute + (seqs + tokens) * allreduce
        if walk:
            dt += walk * per_walk
        if host and seqs * host > dt:
            dt = seqs * host
        self.busy = True
        self.busy_s += dt
        self.steps_run += 1
        self.prefill_tokens += tokens
        self.decode_tokens += seqs
        self.queue_area += queue * dt
        if queue > self.queue_max:
            self.queue_max = queue
        end = now + dt
        self.step_end, self.step_queue = end, queue
        clock = self.clock
        heappush(clock.heap, (end, next(clock.tick), self.step_done, None))

    def step_done(self, now: float, _: object) -> None:
        raise NotImplementedError

    def snapshot(self, now: float) -> Counters:
        """The counters at `now`: the running step counts only up to now."""
        rest = self.step_end - now if self.busy and self.step_end > now else 0.0
        return Counters(
            self.busy_s - rest,
            self.steps_run,
            self.batch_seqs,
            self.batch_square,
            self.prefill_tokens,
            self.decode_tokens,
            self.queue_area - self.step_queue * rest,
            self.queue_max,
        )


class BatchReplica(_Engine):
    """A colocated replica (chunked prefill + decode) or a decode replica of a disaggregated pool.

    Colocated: a request is admitted when its prompt + full output fits in the free KV tokens and
    fewer than `max_seqs` sequences are in the batch; each step then takes up to `chunk` prompt
    tokens of the admitted prompts, first come first served, plus every running decode sequence.
    The step that completes a prompt yields its first token. Decode replica: a sequence arrives
    with its first token (after the KV transfer) and is admitted the same way. Reserving the full
    output at admission means a running sequence never runs out of cache (no preemption); a
    request that could never fit is refused before it is routed, so the queue cannot deadlock.
    """

    __slots__ = (
        "admitted",
        "chunk_compute_s",
        "completing",
        "ctx",
        "finishing",
        "free_kv",
        "max_seqs",
        "n",
        "prefilling",
        "prefills",
        "steps",
        "waiting",
        "walkers",
    )

    def __init__(
        self,
        model: StepModel,
        kv_tokens: float,
        max_seqs: int,
        chunk_compute_s: float,
        prefills: bool,
        ledger: Ledger,
        clock: Clock,
    ) -> None:
        super().__init__(model, ledger, clock)
        self.max_seqs, self.chunk_compute_s, self.prefills = max_seqs, chunk_compute_s, prefills
        self.free_kv = kv_tokens
        self.waiting: deque[int] = deque()  # not yet admitted
        self.prefilling: deque[int] = deque()  # admitted, prompt not yet complete (colocated)
        self.finishing: list[tuple[int, int]] = []  # heap of (last step index, request)
        self.completing: list[int] = []  # prompts the running step completes
        self.n = 0  # running decode sequences
        self.ctx = 0  # their context tokens
        self.admitted = 0  # sequences holding KV: prefilling + decoding
        self.steps = 0  # steps done: the index of the next step
        self.walkers: list[tuple[int, int]] | None = [] if model.s_per_walk else None
        """Where attention walks each context alone: a max-heap of running sequences as
        (−(context − step index), last step index), so the longest context is its top's."""

    @property
    def full(self) -> bool:
        """A new sequence would wait for a batch slot: every slot is taken or some wait."""
        return bool(self.waiting) or self.admitted >= self.max_seqs

    def arrive(self, now: float, rid: int) -> None:
        """A prompt to prefill (colocated) or a prefilled sequence to decode (decode role)."""
        self.waiting.append(rid)
        ledger = self.ledger
        out = ledger.output_tokens[rid]
        self.backlog += ledger.input_tokens[rid] + out if self.prefills else out - 1
        if self.prefills:
            self.prefill_backlog += ledger.input_tokens[rid]
        if not self.busy:
            self._start(now)

    def step_done(self, now: float, _: object) -> None:
        ledger = self.ledger
        k = self.steps
        self.steps = k + 1
        n = self.n
        if n:
            self.ctx += n
            self.backlog -= n
            finishing = self.finishing
            while finishing and finishing[0][0] <= k:
                rid = heappop(finishing)[1]
                ledger.finish_s[rid] = now
                size = ledger.input_tokens[rid] + ledger.output_tokens[rid]
                self.ctx -= size
                self.free_kv += size
                self.admitted -= 1
                n -= 1
        if self.completing:
            for rid in self.completing:
                self.prefilling.popleft()
                ledger.first_s[rid] = now
                self.backlog -= 1
                out = ledger.output_tokens[rid]
                if out == 1:
                    ledger.finish_s[rid] = now
                    self.free_kv += ledger.input_tokens[rid] + 1
                    self.admitted -= 1
                else:  # joins the next step, index k + 1, and decodes O − 1 tokens
                    n += 1
                    self.ctx += ledger.input_tokens[rid] + 1
                    heappush(self.finishing, (k + out - 1, rid))
                    if self.walkers is not None:
                        self._walks(ledger.input_tokens[rid] + 1, k + 1, k + out - 1)
            self.completing = []
        self.n = n
        self._start(now)

    def _admit(self) -> None:
        """Admit waiting requests, first come first served, while the cache and batch allow."""
        ledger = self.ledger
        waiting = self.waiting
        while waiting and self.admitted < self.max_seqs:
            rid = waiting[0]
            size = ledger.input_tokens[rid] + ledger.output_tokens[rid]
            if size > self.free_kv:
                break
            waiting.popleft()
            self.free_kv -= size
            self.admitted += 1
            if self.prefills:
                self.prefilling.append(rid)
            else:  # joins the next step with its first token; O − 1 steps to go
                self.n += 1
                self.ctx += ledger.input_tokens[rid] + 1
                last = self.steps + ledger.output_tokens[rid] - 2
                heappush(self.finishing, (last, rid))
                if self.walkers is not None:
                    self._walks(ledger.input_tokens[rid] + 1, self.steps, last)

    def _walks(self, context: int, first: int, last: int) -> None:
        """A sequence of `context` tokens at step `first` runs until step `last`."""
        heappush(self.walkers, (first - context, last))

    def _walk(self) -> int:
        """The longest running context at the next step (finished sequences leave lazily)."""
        walkers, k = self.walkers, self.steps
        while walkers and walkers[0][1] < k:
            heappop(walkers)
        return k - walkers[0][0] if walkers else 0

    def _start(self, now: float) -> None:
        """Admit what fits, compose the next step and put its end on the clock (or go idle)."""
        if self.waiting:
            self._admit()
        tokens = prompts = 0
        compute = 0.0
        prefilling = self.prefilling
        if prefilling:
            tokens, compute, prompts = take_prompts(
                prefilling, self.ledger, self.chunk_compute_s, self.completing
            )
            self.backlog -= tokens
            self.prefill_backlog -= tokens
        n = self.n
        if not n and not tokens:
            self.busy = False
            return
        self.batch_seqs += n + prompts
        self.batch_square += (n + prompts) ** 2
        queue = len(self.waiting) + len(prefilling) - prompts
        walk = self._walk() if self.walkers is not None and n else 0
        self._run_step(now, n, self.ctx, tokens, compute, queue, walk)


class PrefillReplica(_Engine):
    """A prefill replica of a disaggregated pool: prompts first come first served, each step
    giving them the chunk's compute (a long prompt spans steps, short ones share one). A
    finished prompt goes to `done`, which starts its KV transfer. Its KV lives only until then:
    not bounded here (the planner checked the longest prompt fits)."""

    __slots__ = ("batch", "chunk_compute_s", "done", "queue")
    full = False  # no batch slots: a prompt waits only for the prompts ahead

    def __init__(
        self,
        model: StepModel,
        chunk_compute_s: float,
        ledger: Ledger,
        clock: Clock,
        done: Callable[[float, int], None],
    ) -> None:
        super().__init__(model, ledger, clock)
        self.chunk_compute_s, self.done = chunk_compute_s, done
        self.queue: deque[int] = deque()
        self.batch: list[int] = []

    def arrive(self, now: float, rid: int) -> None:
        self.queue.append(rid)
        self.backlog += self.ledger.input_tokens[rid]
        self.prefill_backlog += self.ledger.input_tokens[rid]
        if not self.busy:
            self._start(now)

    def step_done(self, now: float, _: object) -> None:
        for rid in self.batch:
            self.done(now, rid)
        self._start(now)

    def _start(self, now: float) -> None:
        queue = self.queue
        self.batch = []
        if not queue:
            self.busy = False
            return
        tokens, compute, prompts = take_prompts(
            queue, self.ledger, self.chunk_compute_s, self.batch
        )
        for _ in self.batch:
            queue.popleft()
        self.backlog -= tokens
        self.prefill_backlog -= tokens
        self.batch_seqs += prompts
        self.batch_square += prompts**2
        self._run_step(now, 0, 0, tokens, compute, len(queue))


def take_prompts(
    prompts: deque[int], ledger: Ledger, budget_s: float, completed: list[int]
) -> tuple[int, float, int]:
    """Fill one step's prefill compute budget from the prompts in order: whole prompts while they
    fit, then part of the next. Completed prompts are appended to `completed`. Returns the tokens
    taken, their compute and how many prompts the step touches."""
    left, per_token = ledger.prompt_left, ledger.prefill_s_per_token
    tokens = touched = 0
    compute = 0.0
    for rid in prompts:
        need, cost = left[rid], per_token[rid]
        take = min(need, int(budget_s / cost)) if cost > 0 else need
        if take <= 0:
            if touched == 0:  # never stall: one token at least
                take = 1
            else:
                break
        left[rid] = need - take
        tokens += take
        compute += take * cost
        budget_s -= take * cost
        touched += 1
        if take == need:
            completed.append(rid)
        else:
            break
    return tokens, compute, touched
