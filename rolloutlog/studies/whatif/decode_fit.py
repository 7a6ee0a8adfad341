"""Fit the shared world's decode curve from a log: seconds per token against concurrency.

A completed episode's generation seconds (dispatch to arrival, weight-update pauses taken
out as `fit.UpdatePauses` does) are, in the shared world (`world.inference = "shared"`),

    seconds = overhead + p · prompt + (tokens + s) · (a + b · n) · (1 + k · f)

with `n` the sequences decoding beside it on its server: `a` (`decode_step_s`) and `b`
(`decode_s_per_seq`) of `step(n) = a + b·n`; `s` (`request_steps`) the decode steps the
request pays off the batch (handed back at a step boundary, through a busy server), which
grow with the load as the step does; `p` seconds of prefill per prompt token;
`prompt` the prompt tokens dispatched to its server during its life (`Prefills`: each
prefill stalls the server's batch); `overhead` its environment seconds, one constant;
and, when training shares the compute (`world.colocated`), `f` the fraction of its life
the trainer trained and `k` the coupling (kept only where it explains most of the
spread, `COUPLING_GAIN`). The log does not say which server an episode
ran on, so `n` is the episodes in flight during its life (their time average), divided
by the servers. `s` and `k` are found by a scan, the rest by non-negative least squares
over the completed episodes. Where the log's concurrency spans a range, each episode's
error counts relative to its seconds as a first, unweighted fit predicts them (the error
of an episode's seconds grows with them: in seconds, the long episodes of the busiest
probes would set the curve alone, and on the CPU twin they bend it to no fixed part; the
coupling `k` is chosen on the first fit). A log at one concurrency is fitted in seconds:
weighed, the what-ifs of the twin's probes into other settings came out further off.

What tells `s` from the prefill and the overhead: an episode's prompt term grows with its
life (the prompts dispatched while it ran), its request steps do not, and the overhead
does not grow with `n`; so short episodes' seconds at each concurrency identify `s`, and
only where `b` is identified (the step grows with `n`) is `s` told from the overhead.

`n`'s range in the log is what identifies `b`: a log that kept the same number in flight
throughout (`NARROW_RATIO`) cannot tell `a` from `b`, and the fit then holds the server at
the throughput it measured (compute-bound: `step(n) = c·n`, `c` fitted), the assumption
that claims nothing beyond the log. Episodes that were interrupted or cancelled and
arrived late are left out (their seconds are not one generation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import attrs
import numpy as np

from rolloutlog.events.types import EpisodeCompleted, Event
from rolloutlog.studies.whatif.fit import (
    FitError,
    LogCollector,
    TrainWindow,
    UpdatePauses,
    collect,
    train_windows,
)

EPISODES_MIN = 10  # fewer completed episodes than this cannot separate three parameters
NARROW_RATIO = 1.5  # running per server spanning less than this: `b` is not identified
COUPLINGS = tuple(0.05 * i for i in range(81))  # the scan of `k`: 0 to 4
REQUEST_STEPS = tuple(0.1 * i for i in range(41))  # the scan of `s`: 0 to 4 decode steps
RELATIVE_FLOOR = 0.01  # the least predicted seconds a weight divides by, x the mean
# a coupling is kept only where it divides the squared residual by this much: seconds that
# vary with the training share for other reasons (bursts of prefill after an update) give
# simulated logs of uncoupled worlds a gain of up to 4, coupled ones 9 and more
COUPLING_GAIN = 5.0
STEP_FLOOR_S = 1e-9  # `decode_step_s` of a compute-bound fit (the world's least)
PER_SEQ_FLOOR_S = 1e-6  # the least decode seconds per running sequence a fit gives


@attrs.frozen(kw_only=True)
class DecodeRows:
    """Per completed episode: generation seconds, completion tokens, prompt tokens
    dispatched to its server during its life (`Prefills`), running sequences per server,
    the fraction of its life the trainer trained, and its dispatch time (where the KV fit,
    `kv_fit`, reads the tokens the servers held)."""

    seconds: np.ndarray
    tokens: np.ndarray
    prompt: np.ndarray
    running: np.ndarray
    training: np.ndarray
    dispatched: np.ndarray

    @classmethod
    def join(cls, parts: Sequence[DecodeRows]) -> DecodeRows:
        return cls(
            **{
                field.name: np.concatenate([getattr(part, field.name) for part in parts])
                for field in attrs.fields(cls)
            }
        )

    def where(self, kept: np.ndarray) -> DecodeRows:
        """The rows a boolean mask keeps."""
        return DecodeRows(
            **{field.name: getattr(self, field.name)[kept] for field in attrs.fields(DecodeRows)}
        )


@attrs.frozen(kw_only=True)
class DecodeFit:
    """The fitted curve, the range of concurrency that identifies it, and how well it fits."""

    decode_step_s: float  # a
    decode_s_per_seq: float  # b
    decode_compute_s_per_seq: float  # c: the compute-bound form, where b is not identified
    request_steps: float  # s: decode steps each request pays off the batch
    prefill_s_per_token: float  # p
    overhead_s: float  # queueing and environment per episode, as one constant
    coupling: float  # k: training slows decoding 1 + k
    servers: int
    episodes: int  # completed episodes the fit rests on
    running_min: float  # sequences per server: the least and most of the episodes' means
    running_max: float
    prefill_min: float  # prompt tokens dispatched per server during an episode's life
    prefill_max: float
    r_squared: float
    calibration: float = 1.0  # the factor on the costs that holds the recorded rate

    @property
    def separated(self) -> bool:
        """Whether the log's concurrency range told `a` from `b`."""
        return self.decode_compute_s_per_seq == 0.0

    def step_s(self, running: float) -> float:
        """Seconds of a decode step with `running` sequences, by the fitted curve."""
        return max(
            self.decode_step_s + self.decode_s_per_seq * running,
            self.decode_compute_s_per_seq * running,
        )

    def predicted(self, rows: DecodeRows) -> np.ndarray:
        """Each row's seconds by the fitted curve (the fit's own design, `_design`)."""
        step, per_seq = (
            (self.decode_step_s, self.decode_s_per_seq)
            if self.separated
            else (0.0, self.decode_compute_s_per_seq)
        )
        coefficients = np.array([self.overhead_s, self.prefill_s_per_token, step, per_seq])
        predicted: np.ndarray = _design(rows, self.coupling, self.request_steps) @ coefficients
        return predicted


def fit_decode(logs: Iterable[Iterable[Event]], *, servers: int = 1) -> DecodeFit:
    """Fit the curve from one or more logs of runs on `servers` inference servers (several
    probes at different concurrency identify `b` where one cannot)."""
    check_servers(servers)
    parts = []
    for events in logs:
        collector = collect(events)
        parts.append(decode_rows(collector, train_windows(collector), servers))
    return fit_rows(DecodeRows.join(parts), servers)


def check_servers(servers: int) -> None:
    if servers < 1:
        raise FitError(f"servers: must be >= 1 (got {servers})")


def fit_rows(rows: DecodeRows, servers: int) -> DecodeFit:
    """The least-squares fit of `rows`; too few of them is a `FitError` that says so."""
    if len(rows.seconds) < EPISODES_MIN:
        raise FitError(
            f"the log has {len(rows.seconds)} completed episodes to fit a decode curve "
            f"from; it needs at least {EPISODES_MIN}"
        )
    running = rows.running
    separated = running.max() >= NARROW_RATIO * max(running.min(), 1e-9)
    steps = REQUEST_STEPS if separated else (0.0,)  # `s` needs the step to grow with n
    plain = _scan(rows, steps, (0.0,), separated)
    coupled = _scan(rows, (plain.steps,), COUPLINGS, separated)
    first = coupled if coupled.residual * COUPLING_GAIN <= plain.residual else plain
    best = first
    if separated:  # errors relative to the seconds, so that no one concurrency sets the curve
        floor = RELATIVE_FLOOR * rows.seconds.mean()
        weights = 1.0 / np.maximum(_predicted(rows, first), floor)
        best = _scan(rows, steps, (first.coupling,), separated, weights)
    residual = rows.seconds - _predicted(rows, best)
    spread = float(np.sum((rows.seconds - rows.seconds.mean()) ** 2))
    return DecodeFit(
        decode_step_s=max(best.a, STEP_FLOOR_S) if separated else STEP_FLOOR_S,
        decode_s_per_seq=best.b if separated else 0.0,
        decode_compute_s_per_seq=0.0 if separated else best.b,
        request_steps=best.steps,
        prefill_s_per_token=float(best.coefficients[1]),
        overhead_s=float(best.coefficients[0]),
        coupling=best.coupling,
        servers=servers,
        episodes=len(rows.seconds),
        running_min=float(running.min()),
        running_max=float(running.max()),
        prefill_min=float(rows.prompt.min()),
        prefill_max=float(rows.prompt.max()),
        r_squared=1.0 - float(residual @ residual) / spread if spread > 0 else 1.0,
    )


class _Solution(NamedTuple):
    residual: float  # the (weighted) squared residual
    coupling: float  # k
    steps: float  # s
    coefficients: np.ndarray  # overhead, p, a, b

    @property
    def a(self) -> float:
        return float(self.coefficients[2])

    @property
    def b(self) -> float:
        return float(self.coefficients[3])


def _scan(
    rows: DecodeRows,
    steps: Sequence[float],
    couplings: Sequence[float],
    separated: bool,
    weights: np.ndarray | None = None,
) -> _Solution:
    """The least (weighted) squared residual over every `s` of `steps` and `k` of
    `couplings`."""
    solutions = (_least_squares(rows, k, s, separated, weights) for s in steps for k in couplings)
    return min(solutions, key=lambda solution: solution.residual)


def _design(rows: DecodeRows, k: float, s: float) -> np.ndarray:
    """The columns of the fit at coupling `k` and request steps `s`: overhead, prompt,
    decode steps, decode steps times the running sequences."""
    decoding = (rows.tokens + s) * (1.0 + k * rows.training)
    return np.column_stack([np.ones_like(decoding), rows.prompt, decoding, decoding * rows.running])


def _predicted(rows: DecodeRows, solution: _Solution) -> np.ndarray:
    """Each episode's seconds by a solution."""
    predicted: np.ndarray = _design(rows, solution.coupling, solution.steps) @ solution.coefficients
    return predicted


def _least_squares(
    rows: DecodeRows, k: float, s: float, separated: bool, weights: np.ndarray | None
) -> _Solution:
    """The fit at coupling `k` and request steps `s`, each episode's error by `weights`
    (None: in seconds); without `separated`, `a` is 0 and `b` is the compute-bound `c`."""
    design, target = _design(rows, k, s), rows.seconds
    if weights is not None:
        design, target = design * weights[:, None], target * weights
    coefficients = _non_negative(design, target, [True, True, separated, True])
    residual = target - design @ coefficients
    return _Solution(float(residual @ residual), k, s, coefficients)


def _non_negative(design: np.ndarray, target: np.ndarray, used: list[bool]) -> np.ndarray:
    """Least squares with every coefficient >= 0: a column whose coefficient comes out
    negative is dropped (held at 0) and the rest refitted (the parameters are seconds).
    The last column, the decode time per running sequence, is dropped last: where it
    alone comes out negative, the prefill column (which shares its load) goes first, and
    at the end it is held at `PER_SEQ_FLOOR_S`, never 0 (a server that decodes in no
    time is no model of one)."""
    active = list(used)
    coefficients = np.zeros(design.shape[1])
    last = design.shape[1] - 1
    while any(active):
        columns = [i for i, on in enumerate(active) if on]
        solved, *_ = np.linalg.lstsq(design[:, columns], target, rcond=None)
        coefficients[:] = 0.0
        coefficients[columns] = solved
        negative = [i for i in columns if coefficients[i] < 0.0]
        if not negative:
            break
        others = [i for i in negative if i != last] or [i for i in columns if 0 < i < last]
        if not others:
            break
        active[min(others, key=lambda i: coefficients[i])] = False
    coefficients[last] = max(coefficients[last], PER_SEQ_FLOOR_S)
    return coefficients


def decode_rows(
    collector: LogCollector, windows: Sequence[TrainWindow], servers: int
) -> DecodeRows:
    """The rows of each completed episode that ran in one piece."""
    pauses = UpdatePauses(collector)
    inflight = Occupancy.of_flights(collector)
    prefills = Prefills(collector)
    training = Occupancy([(w.start, 1) for w in windows] + [(w.end, -1) for w in windows])
    interrupted = collector.interrupted
    rows: list[tuple[float, float, float, float, float, float]] = []
    for episode_id, flight in collector.flights.items():
        arrival = flight.arrival
        if not isinstance(arrival, EpisodeCompleted) or flight.late or episode_id in interrupted:
            continue
        if arrival.t <= flight.t:
            continue
        rows.append(
            (
                pauses.generation_s(flight.t, arrival.t),
                float(arrival.completion_tokens),
                prefills.between(flight.t, arrival.t) / servers,
                inflight.mean(flight.t, arrival.t) / servers,
                training.mean(flight.t, arrival.t),
                flight.t,
            )
        )
    table = np.array(rows).reshape(-1, 6)
    return DecodeRows(
        seconds=table[:, 0],
        tokens=table[:, 1],
        prompt=table[:, 2],
        running=table[:, 3],
        training=table[:, 4],
        dispatched=table[:, 5],
    )


class Prefills:
    """Prompt tokens dispatched over time: the prefill work an episode waits behind.

    Each dispatch's prefill stalls every sequence decoding on its server (the world's
    prefill runs before the next decode step), so an episode's seconds grow with the prompt
    tokens dispatched during its life, its own included. An episode that never completed
    counts the median prompt of those that did."""

    def __init__(self, collector: LogCollector) -> None:
        prompts = [
            f.arrival.prompt_tokens
            for f in collector.flights.values()
            if isinstance(f.arrival, EpisodeCompleted)
        ]
        typical = float(np.median(prompts)) if prompts else 0.0
        dispatches = sorted(
            (f.t, f.arrival.prompt_tokens if isinstance(f.arrival, EpisodeCompleted) else typical)
            for f in collector.flights.values()
        )
        self.times = np.array([t for t, _ in dispatches])
        self.total = np.cumsum([tokens for _, tokens in dispatches])

    def between(self, start: float, end: float) -> float:
        """Prompt tokens dispatched in [start, end]."""
        low = int(np.searchsorted(self.times, start, side="left"))
        high = int(np.searchsorted(self.times, end, side="right"))
        before = self.total[low - 1] if low > 0 else 0.0
        return float(self.total[high - 1] - before) if high > 0 else 0.0


class Occupancy:
    """A count over time (episodes in flight, the trainer training, tokens held), as a step
    function with its running integral."""

    def __init__(self, changes: Sequence[tuple[float, float]]) -> None:
        changes = sorted(changes) or [(0.0, 0)]
        times = np.array([t for t, _ in changes])
        counts = np.cumsum([step for _, step in changes])  # from times[i] on
        self.times = times
        self.counts = counts
        self.area = np.concatenate([[0.0], np.cumsum(counts[:-1] * np.diff(times))])

    @classmethod
    def of_flights(cls, collector: LogCollector) -> Occupancy:
        """Episodes in flight: dispatch to arrival or cancellation (or the log's end)."""
        changes: list[tuple[float, int]] = []
        for flight in collector.flights.values():
            ends = [t for t in (flight.cancelled_t, flight.arrival and flight.arrival.t) if t]
            changes += [(flight.t, 1), (min(ends) if ends else collector.end_t, -1)]
        return cls(changes)

    def at(self, t: float) -> int:
        """The count at `t`."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return int(self.counts[i]) if i >= 0 else 0

    def peak(self) -> int:
        """The largest count."""
        return int(self.counts.max(initial=0))

    def integral(self, t: float) -> float:
        """The count's integral from the start to `t`."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        if i < 0:
            return 0.0
        return float(self.area[i] + self.counts[i] * (t - self.times[i]))

    def mean(self, start: float, end: float) -> float:
        """The time average of the count over [start, end]."""
        return (self.integral(end) - self.integral(start)) / (end - start)
