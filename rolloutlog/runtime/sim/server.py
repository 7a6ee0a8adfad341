"""One inference server of the shared world: continuous batching in virtual time.

A server holds requests waiting for admission and running requests that decode together.
One decode step advances every running sequence by one token and takes
`DecodeCurve.step(n)` seconds for n running, so between happenings each running sequence
advances `elapsed / step(n)` tokens: a single token clock per server
(`clock`, tokens per sequence since it started) tells every request's progress, and the
next finish is the smallest finishing mark, found in a heap. Nothing ticks per token.

The server moves lazily. A finished request is seen off the server only when it arrives,
after its environment seconds, so the server's happening falls at the earliest time any
of its requests could arrive: the next finish (or full cache), plus the time the clock
needs, at the fastest step there is (`step(1)`), to reach the least arrival mark (a
request's finishing mark plus its own steps and its environment seconds in such steps; a
second heap), and no later than that plus the fewest environment seconds of a waiting
request. Finishes before it are handled together, retroactively and in order, when it
comes due or when the server is next touched (whoever reads a server brings it to the
present first: `SharedInference`).

- **Prefill** costs `prefill_s_per_token` per prompt token computed. An admitted request
  joins the batch at once, but nothing decodes until the server's prefill backlog clears
  (`prefill_until`: vLLM's scheduler runs a waiting prefill before the next decode), so a
  prefill ending needs no happening of its own. With
  `prefix_caching`, a group's prompt is read (and held in the KV cache) once while any of
  its members holds it on the server. A request preempted or resubmitted recomputes its
  tokens so far as part of its prompt.
- **KV cache.** A request holds its prompt and its tokens so far. It is admitted only while
  `running < max_running` and its tokens fit below `1 - KV_WATERMARK` of the capacity (a
  server with nothing admitted takes any request that fits at all); when growth fills the
  cache the newest running request is preempted back to the head of the queue, keeping its
  tokens to recompute (vLLM's recompute preemption).
- **Pause** (a weight update): nothing advances until it ends; a prefill under way ends
  that much later.
- **Slowdown**: a factor on the decode step and the prefill (a colocated trainer).
- **A request's own steps** (`request_steps`, k): a request that leaves the batch is
  handed back k decode steps later, each as long as the step of the batch it left (a
  serving process returns a finished sequence at a step boundary, through its own busy
  loop and the HTTP round trip), so the cost grows with the batch; it holds no batch slot
  and no KV meanwhile. One request alone takes its prefill and `(tokens + k) · step(1)`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Literal

import attrs

from rolloutlog.runtime.sim.clock import Entry, EventQueue
from rolloutlog.runtime.sim.world import EpisodePlan

KV_WATERMARK = 0.01  # vLLM keeps 1% of the cache's blocks free when it admits a request
TOKENS_EPSILON = 1e-9  # per token of the clock: two marks this close are one instant
Phase = Literal["waiting", "running", "env", "interrupted", "off"]


@attrs.frozen
class DecodeCurve:
    """Seconds of one decode step with n sequences running: `a + b·n`, and never less than
    `c·n` (where the server is compute-bound, throughput stops growing at `1/c`)."""

    step_s: float  # a: the step of one sequence (weights read once per step)
    s_per_seq: float  # b: what each running sequence adds (its KV read)
    compute_s_per_seq: float = 0.0  # c: the compute-bound floor per sequence

    def step(self, running: int) -> float:
        """Seconds of one decode step with `running` sequences."""
        return max(self.step_s + self.s_per_seq * running, self.compute_s_per_seq * running)


@attrs.frozen
class ServerSpec:
    """What every server of a world is: its curve, prefill cost, cache and batch limits."""

    curve: DecodeCurve
    prefill_s_per_token: float
    kv_capacity_tokens: float
    max_running: int
    prefix_caching: bool
    request_steps: float = 0.0  # decode steps a request pays off the batch (module doc)


@attrs.define(slots=True, eq=False)
class Request:
    """One episode's generation: its work, its progress, and where it is."""

    episode_id: str
    group_id: str
    plan: EpisodePlan
    started: float  # virtual time of dispatch
    prompt: int
    target: int  # tokens to decode before its outcome (its completion, or where it fails)
    env_s: float  # environment seconds after decoding, off the server
    done: float = 0.0  # tokens decoded as of the server's clock at `mark`
    mark: float = 0.0
    serial: int = -1  # this request's entry in its server's finish heap
    server: int = -1
    phase: Phase = "waiting"
    cancelled: str | None = None  # the cancel reason of an abort that lost its race
    left_s: float | None = None  # tokens still to decode while interrupted (else None)
    stopped: float | None = None  # virtual time it was interrupted
    entry: Entry | None = None  # the arrival, once decoding ended


class Server:
    """One server's queue, prefill, running batch and KV cache, advanced lazily."""

    def __init__(self, index: int, spec: ServerSpec, queue: EventQueue) -> None:
        self.index, self.spec, self.queue = index, spec, queue
        self.waiting: deque[Request] = deque()
        self.running: dict[str, Request] = {}  # in admission order: the newest is last
        self.groups: dict[str, int] = {}  # members holding KV per group (prefix cache)
        self.kv = 0.0  # tokens held in the KV cache
        self.clock = 0.0  # tokens each running sequence has advanced since the start
        self.synced = 0.0  # virtual time the state above is true at
        self.paused_until = 0.0
        self.prefill_until = 0.0
        self.slowdown = 1.0
        self.finished: list[tuple[float, Request]] = []  # handed back, for the caller
        self.preemptions = 0
        self.decoded = 0.0  # tokens decoded over all sequences (work done, for its ledger)
        self._heap: list[tuple[float, int, Request]] = []
        self._serial = 0
        self._steps: list[float] = []  # step seconds by batch size, at the present slowdown
        self._entry: Entry | None = None
        self._arrivals: list[tuple[float, int, Request]] = []  # finish + environment marks
        self._fastest = spec.curve.step(1)  # seconds of the fastest step (no slowdown is < 1)

    @property
    def load(self) -> int:
        """Requests on the server (the router's least-loaded measure)."""
        return len(self.waiting) + len(self.running)

    def submit(self, now: float, request: Request) -> None:
        """A request arrives: it waits, and is admitted when the batch and cache allow."""
        self.advance(now)
        request.server = self.index
        if self.waiting or not self._take(request, now):  # the queue first, in order
            request.phase = "waiting"
            self.waiting.append(request)
        self.reschedule(now)

    def remove(self, now: float, request: Request) -> float:
        """Take a request off the server (cancelled or interrupted): its tokens so far."""
        self.advance(now)
        if request.server != self.index or request.phase not in ("waiting", "running"):
            raise ValueError(
                f"{request.episode_id} is not on server {self.index} at t={now} "
                f"(it is {request.phase})"
            )
        tokens = self.tokens(request)
        if request.phase == "waiting":
            self.waiting.remove(request)
        else:
            self._release(request, tokens)
            del self.running[request.episode_id]
        request.phase, request.done, request.serial = "off", tokens, -1
        self._rebase()
        self._admit(now)
        self.reschedule(now)
        return tokens

    def pause(self, now: float, duration_s: float) -> None:
        """A weight update: nothing advances for `duration_s`; a prefill ends that much later."""
        self.advance(now)
        self.paused_until = now + duration_s
        if self.prefill_until > now:
            self.prefill_until += duration_s
        self.reschedule(now)

    def slow(self, now: float, factor: float) -> None:
        """From now on, decode steps and prefill take `factor` times as long."""
        self.advance(now)
        if self.prefill_until > now:
            start = max(now, self.paused_until)
            self.prefill_until = start + (self.prefill_until - start) * factor / self.slowdown
        self.slowdown = factor
        self._steps.clear()
        self.reschedule(now)

    def advance(self, now: float) -> None:
        """Bring the server to `now`: sequences decode, finish or are preempted. (Already
        there: what falls due at `now` is its own happening, scheduled at `now`.)"""
        t = self.synced
        if t == now:
            return
        running = self.running
        while running:  # each pass finishes or preempts a request, or stops
            paused, prefill = self.paused_until, self.prefill_until  # `_resumes`, inline
            start = paused if paused > prefill else prefill
            if t > start:
                start = t
            if start > now:
                break
            reached = self._decode(start, now)
            if reached is None or reached >= now:  # what fell due at `now` is all handled
                break
            t = reached
        self.synced = now

    def _decode(self, start: float, now: float) -> float | None:
        """Decode from `start` towards `now`; the time of a finish or a full cache on the
        way (handled), or None when the sequences simply decoded until `now`."""
        finish, room, step_s, n = self._ahead()
        tokens = (now - start) / step_s
        if finish < tokens:
            tokens = finish
        if room < tokens:
            tokens = room
        if tokens < 0.0:
            tokens = 0.0
        self.clock += tokens
        self.kv += n * tokens
        self.decoded += n * tokens
        t = start + tokens * step_s
        if t > now:
            t = now
        epsilon = TOKENS_EPSILON * (1.0 + self.clock)
        if tokens >= finish - epsilon:
            self._finish(t)
            return t
        if tokens >= room - epsilon:
            self._preempt()
            return t
        return None

    def _finish(self, t: float) -> None:
        """Every running request whose finishing mark is reached leaves the batch."""
        heap, reached = self._heap, self.clock + TOKENS_EPSILON * (1.0 + self.clock)
        steps = self.spec.request_steps  # handed back after them, at this batch's step
        handed = t + steps * self._step_s(len(self.running)) if steps else t
        while heap and heap[0][0] <= reached:
            _, serial, request = heapq.heappop(heap)
            if request.serial != serial:
                continue
            del self.running[request.episode_id]
            self._release(request, self._tokens_running(request))
            request.done, request.phase, request.serial = float(request.target), "env", -1
            self.finished.append((handed, request))
        self._rebase()
        if self.waiting:
            self._admit(t)

    def _preempt(self) -> None:
        """The cache is full: preempt the newest running requests until the others can grow
        (at least one: a member whose sibling holds the prompt frees only its tokens)."""
        capacity = self.spec.kv_capacity_tokens
        while self.running:
            request = self.running.pop(next(reversed(self.running)))
            request.done = self._tokens_running(request)
            self._release(request, request.done)
            request.phase, request.serial = "waiting", -1
            self.waiting.appendleft(request)
            self.preemptions += 1
            if self.kv < capacity - TOKENS_EPSILON * max(len(self.running), 1):
                break
        self._rebase()

    def _admit(self, t: float) -> None:
        """Admit waiting requests in order while the batch and the cache have room."""
        waiting = self.waiting
        while waiting and self._take(waiting[0], t):
            waiting.popleft()

    def _take(self, request: Request, t: float) -> bool:
        """Admit `request` at `t` if the batch and the cache have room for it."""
        spec, groups, running = self.spec, self.groups, len(self.running)
        if running >= spec.max_running:
            return False
        held = groups.get(request.group_id, 0)
        need = request.done + (0 if spec.prefix_caching and held else request.prompt)
        limit = spec.kv_capacity_tokens
        if running:
            limit *= 1.0 - KV_WATERMARK
        if self.kv + need > limit:
            return False
        self.kv += need
        groups[request.group_id] = held + 1
        if need:  # decoding waits for this prefill, after the pause and the backlog
            start = self._resumes()
            if t > start:
                start = t
            self.prefill_until = start + need * spec.prefill_s_per_token * self.slowdown
        self._join(request)
        return True

    def _join(self, request: Request) -> None:
        request.phase, request.mark = "running", self.clock
        request.serial, self._serial = self._serial, self._serial + 1
        self.running[request.episode_id] = request
        finish = self.clock + max(request.target - request.done, 0.0)
        heapq.heappush(self._heap, (finish, request.serial, request))
        arrival = finish + self.spec.request_steps + request.env_s / self._fastest
        heapq.heappush(self._arrivals, (arrival, request.serial, request))

    def tokens(self, request: Request) -> float:
        """Tokens decoded so far (a running request's grow with the clock)."""
        return self._tokens_running(request) if request.phase == "running" else request.done

    def _tokens_running(self, request: Request) -> float:
        return min(request.done + (self.clock - request.mark), float(request.target))

    def _release(self, request: Request, tokens: float) -> None:
        """Free a request's KV: its tokens, and its prompt unless a sibling still holds it."""
        held = self.groups[request.group_id] - 1
        if held:
            self.groups[request.group_id] = held
        else:
            del self.groups[request.group_id]
        shared = self.spec.prefix_caching and held > 0
        kv = self.kv - tokens - (0 if shared else request.prompt)
        self.kv = kv if kv > 0.0 else 0.0  # rounding, never below empty

    def _rebase(self) -> None:
        """Restart the token clock when the batch empties (it keeps its precision), and
        drop heap entries of requests that left, so the heap is bounded by the batch."""
        if not self.running:
            self.clock = 0.0
            self._heap.clear()
            self._arrivals.clear()
            self.kv = 0.0  # nothing holds the cache: no rounding carried over
            return
        if len(self._heap) > 2 * len(self.running) + 16:
            self._heap = [e for e in self._heap if e[2].serial == e[1]]
            heapq.heapify(self._heap)
        if len(self._arrivals) > 2 * len(self.running) + 16:
            self._arrivals = [e for e in self._arrivals if e[2].serial == e[1]]
            heapq.heapify(self._arrivals)

    def next_due(self, now: float) -> float | None:
        """When the next happening on this server falls (None: nothing will happen): the
        earliest any request on it could arrive (the module's docstring)."""
        if not self.running:
            return None
        finish, room, step_s, _ = self._ahead()
        resumes = self._resumes()
        tokens = finish if finish < room else room
        if tokens < 0.0:
            tokens = 0.0
        start = now if now > resumes else resumes
        arrivals = self._arrivals
        while arrivals[0][2].serial != arrivals[0][1]:  # a request that left the batch
            heapq.heappop(arrivals)
        lag = (arrivals[0][0] - self.clock - tokens) * self._fastest
        for request in self.waiting:
            if request.env_s < lag:
                lag = request.env_s
        return start + tokens * step_s + (lag if lag > 0.0 else 0.0)

    def _resumes(self) -> float:
        """When decoding may go on: after the pause and the prefill backlog."""
        paused, prefill = self.paused_until, self.prefill_until
        return paused if paused > prefill else prefill

    def _ahead(self) -> tuple[float, float, float, int]:
        """Of the running batch: tokens to the next finish, tokens until the cache is full
        (per sequence), the step's seconds, and the batch size."""
        heap = self._heap
        if heap[0][2].serial != heap[0][1]:
            self._skip_dead()
        n = len(self.running)
        try:
            step_s = self._steps[n]
        except IndexError:
            step_s = self._step_s(n)
        room = (self.spec.kv_capacity_tokens - self.kv) / n
        return heap[0][0] - self.clock, room if room > 0.0 else 0.0, step_s, n

    def _skip_dead(self) -> None:
        """Pop the entries of requests that left the batch (their serial is reset)."""
        heap = self._heap
        while heap and heap[0][2].serial != heap[0][1]:
            heapq.heappop(heap)

    def _step_s(self, running: int) -> float:
        """Seconds of a step with `running` sequences at the present slowdown (kept by
        batch size: at most `max_running` + 1 of them)."""
        curve, steps = self.spec.curve, self._steps
        steps.extend(curve.step(n) * self.slowdown for n in range(len(steps), running + 1))
        return steps[running]

    def reschedule(self, now: float, *, found_nothing: bool = False) -> None:
        """Keep one queue entry, at the server's next happening. After a happening that
        `found_nothing` due, a next one the float clock cannot tell from `now` (late in a
        long run, a residue of a token is below the clock's resolution) goes to the next
        representable time: at `now` it would find nothing again, for ever."""
        due = self.next_due(now)
        if found_nothing and due is not None and due <= now:
            due = math.nextafter(now, math.inf)
        entry = self._entry
        if entry is not None and entry.alive:
            if due is not None and entry.t == due:
                return
            self.queue.cancel(entry)
        self._entry = None if due is None else self.queue.push(due, ("server", self.index))
