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

import math
from collections import deque
from heapq import heapify, heappop, heappush
from typing import Literal

import attrs

from rolloutlog.runtime.sim.clock import Entry, EventQueue
from rolloutlog.runtime.sim.world import EpisodePlan

KV_WATERMARK = 0.01  # vLLM keeps 1% of the cache's blocks free when it admits a request
KV_ADMIT = 1.0 - KV_WATERMARK  # the fraction of the cache a non-empty batch admits into
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
    arrives: float = 0.0  # its arrival mark on its server's token clock, while it runs


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
        self._step = 0.0  # of them, the running batch's (kept as the batch changes)
        self._entry: Entry | None = None
        # the arrival marks of the running requests and of those that left (the least of
        # the first is a running request's once the equal least of both are popped)
        self._arrivals: list[float] = []
        self._gone: list[float] = []
        self._fastest = spec.curve.step(1)  # seconds of the fastest step (no slowdown is < 1)
        self._item = ("server", index)  # what its queue entries carry
        # the spec's figures the hot path reads, one attribute away rather than two
        self._capacity = spec.kv_capacity_tokens
        self._max_running = spec.max_running
        self._prefix_caching = spec.prefix_caching
        self._prefill_s = spec.prefill_s_per_token
        self._request_steps = spec.request_steps

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
        self._step = self._step_s(len(self.running))
        self.reschedule(now)

    def advance(self, now: float) -> None:
        """Bring the server to `now`: sequences decode, finish or are preempted. (Already
        there: what falls due at `now` is its own happening, scheduled at `now`.)"""
        t = self.synced
        if t == now:
            return
        running = self.running
        while running:  # each pass decodes to `now`, or to a finish or a full cache first
            paused, prefill = self.paused_until, self.prefill_until  # `_resumes`, inline
            start = paused if paused > prefill else prefill
            if t > start:
                start = t
            if start > now:
                break
            n, step_s, clock = len(running), self._step, self.clock
            finish = self._heap[0][0] - clock  # tokens to the next finish
            room = (self._capacity - self.kv) / n  # tokens until the cache is full
            if room <= 0.0:
                room = 0.0
            tokens = (now - start) / step_s
            if finish < tokens:
                tokens = finish
            if room < tokens:
                tokens = room
            if tokens < 0.0:
                tokens = 0.0
            clock = self.clock = clock + tokens
            grown = n * tokens
            self.kv += grown
            self.decoded += grown
            t = start + tokens * step_s
            if t > now:
                t = now
            epsilon = TOKENS_EPSILON * (1.0 + clock)
            if tokens >= finish - epsilon:
                self._finish(t)
            elif tokens >= room - epsilon:
                self._preempt()
            else:
                break  # decoded until `now`
            if t >= now:  # what fell due at `now` is all handled
                break
        self.synced = now

    def _finish(self, t: float) -> None:
        """Every running request whose finishing mark is reached leaves the batch."""
        clock, heap, running, finished = self.clock, self._heap, self.running, self.finished
        reached = clock + TOKENS_EPSILON * (1.0 + clock)
        steps = self._request_steps  # handed back after them, at this batch's step
        handed = t + steps * self._step if steps else t
        while heap and heap[0][0] <= reached:
            _, serial, request = heappop(heap)
            if request.serial != serial:
                continue
            del running[request.episode_id]
            self._release(request, self._tokens_running(request))
            request.done, request.phase, request.serial = float(request.target), "env", -1
            finished.append((handed, request))
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
        """Admit `request` at `t` if the batch and the cache have room for it: it joins the
        batch at the token clock, its finishing and arrival marks in their heaps."""
        running, groups, group = self.running, self.groups, request.group_id
        if len(running) >= self._max_running:
            return False
        held = groups.get(group, 0)
        need = request.done + (0 if self._prefix_caching and held else request.prompt)
        kv = self.kv + need
        if kv > (self._capacity * KV_ADMIT if running else self._capacity):
            return False
        self.kv = kv
        groups[group] = held + 1
        if need:  # decoding waits for this prefill, after the pause and the backlog
            start = self._resumes()
            if t > start:
                start = t
            self.prefill_until = start + need * self._prefill_s * self.slowdown
        clock, serial = self.clock, self._serial
        request.phase, request.mark, request.serial = "running", clock, serial
        self._serial = serial + 1
        running[request.episode_id] = request
        left = request.target - request.done
        finish = clock + (left if left > 0.0 else 0.0)
        heappush(self._heap, (finish, serial, request))
        arrives = request.arrives = finish + self._request_steps + request.env_s / self._fastest
        heappush(self._arrivals, arrives)
        self._step = self._step_s(len(running))
        return True

    def tokens(self, request: Request) -> float:
        """Tokens decoded so far (a running request's grow with the clock)."""
        return self._tokens_running(request) if request.phase == "running" else request.done

    def _tokens_running(self, request: Request) -> float:
        return min(request.done + (self.clock - request.mark), float(request.target))

    def _release(self, request: Request, tokens: float) -> None:
        """A request leaves the batch: free its KV (its tokens, and its prompt unless a
        sibling still holds it); its arrival mark is gone."""
        heappush(self._gone, request.arrives)
        held = self.groups[request.group_id] - 1
        if held:
            self.groups[request.group_id] = held
        else:
            del self.groups[request.group_id]
        shared = self._prefix_caching and held > 0
        kv = self.kv - tokens - (0 if shared else request.prompt)
        self.kv = kv if kv > 0.0 else 0.0  # rounding, never below empty

    def _rebase(self) -> None:
        """After requests left the batch: restart the token clock when it empties (it keeps
        its precision); else pop the marks of requests that left from the heaps' tops (so
        that `advance` and `next_due` read them as they are) and drop the others when they
        outnumber the batch, so that the heaps are bounded by it."""
        running = self.running
        if not running:
            self.clock = 0.0
            self._heap.clear()
            self._arrivals.clear()
            self._gone.clear()
            self.kv = 0.0  # nothing holds the cache: no rounding carried over
            return
        self._step = self._step_s(len(running))
        heap, arrivals, gone = self._heap, self._arrivals, self._gone
        while heap[0][2].serial != heap[0][1]:  # a running request's entry lies below
            heappop(heap)
        while gone and arrivals[0] == gone[0]:
            heappop(arrivals)
            heappop(gone)
        bound = 2 * len(running) + 16
        if len(heap) > bound:
            heap[:] = [e for e in heap if e[2].serial == e[1]]
            heapify(heap)
        if len(arrivals) > bound:
            arrivals[:] = [request.arrives for request in running.values()]
            heapify(arrivals)
            gone.clear()

    def next_due(self, now: float) -> float | None:
        """When the next happening on this server falls (None: nothing will happen): the
        earliest any request on it could arrive (the module's docstring)."""
        running = self.running
        if not running:
            return None
        clock = self.clock
        finish = self._heap[0][0] - clock  # as `advance` reads them
        room = (self._capacity - self.kv) / len(running)
        if room <= 0.0:
            room = 0.0
        tokens = finish if finish < room else room
        if tokens < 0.0:
            tokens = 0.0
        resumes = self._resumes()
        start = now if now > resumes else resumes
        lag = (self._arrivals[0] - clock - tokens) * self._fastest
        for request in self.waiting:
            if request.env_s < lag:
                lag = request.env_s
        return start + tokens * self._step + (lag if lag > 0.0 else 0.0)

    def _resumes(self) -> float:
        """When decoding may go on: after the pause and the prefill backlog."""
        paused, prefill = self.paused_until, self.prefill_until
        return paused if paused > prefill else prefill

    def _step_s(self, running: int) -> float:
        """Seconds of a step with `running` sequences at the present slowdown (kept by
        batch size: at most `max_running` + 1 of them)."""
        steps = self._steps
        if running >= len(steps):
            curve = self.spec.curve
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
            if due is None:
                self.queue.cancel(entry)
            elif entry.t != due:
                self.queue.move(entry, due)
            return
        self._entry = None if due is None else self.queue.push(due, self._item)
