"""Fit the shared world's decode curve from one log: seconds per token against concurrency.

The first step of fitting the shared-inference world (`world.inference = "shared"`) to a
recorded run. A completed episode's generation seconds (dispatch to arrival, weight-update
pauses taken out as `fit.UpdatePauses` does) are, in that world,

    seconds = overhead + tokens · (a + b · n)

with `n` the sequences decoding beside it on its server: `a` (`decode_step_s`) and `b`
(`decode_s_per_seq`) of `step(n) = a + b·n`, and `overhead` its prefill, queueing and
environment seconds, taken as one constant. The log does not say which server an episode
ran on, so `n` is the episodes in flight during its life (their time average), divided
by the servers. Least squares over the completed episodes gives `a`, `b` and `overhead`;
`n`'s range in the log is what identifies `b`, and is reported with it. Episodes that
were interrupted or cancelled and arrived late are left out (their seconds are not one
generation).

Not fitted yet: the compute-bound floor, prefill per token, the KV capacity, the pause,
the trainer against inference load (docs/whatif.md).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np

from rolloutlog.events.types import EpisodeCompleted, EpisodeInterrupted, Event
from rolloutlog.studies.whatif.fit import FitError, LogCollector, UpdatePauses

EPISODES_MIN = 10  # fewer completed episodes than this cannot separate three parameters


@attrs.frozen(kw_only=True)
class DecodeFit:
    """The fitted curve, the range of concurrency that identifies it, and how well it fits."""

    decode_step_s: float  # a
    decode_s_per_seq: float  # b
    overhead_s: float  # prefill, queueing and environment per episode, as one constant
    servers: int
    episodes: int  # completed episodes the fit rests on
    running_min: float  # sequences per server: the least and most of the episodes' means
    running_max: float
    r_squared: float

    def step_s(self, running: float) -> float:
        """Seconds of a decode step with `running` sequences, by the fitted curve."""
        return self.decode_step_s + self.decode_s_per_seq * running


def fit_decode(logs: Iterable[Iterable[Event]], *, servers: int = 1) -> DecodeFit:
    """Fit `a`, `b` and the overhead from one or more logs of runs on `servers` inference
    servers (several probes at different concurrency identify `b` where one cannot)."""
    if servers < 1:
        raise FitError(f"servers: must be >= 1 (got {servers})")
    rows = [row for events in logs for row in decode_rows(events, servers)]
    if len(rows) < EPISODES_MIN:
        raise FitError(
            f"the logs have {len(rows)} completed episodes to fit a decode curve from; "
            f"it needs at least {EPISODES_MIN}"
        )
    return _least_squares(np.array(rows), servers)


def decode_rows(events: Iterable[Event], servers: int) -> list[tuple[float, float, float]]:
    """(generation seconds, completion tokens, running per server) of each completed
    episode that ran in one piece."""
    collector, interrupted = LogCollector(), set()
    for event in events:
        collector.observe(event)
        if isinstance(event, EpisodeInterrupted):
            interrupted.add(event.episode_id)
    pauses = UpdatePauses(collector)
    inflight = _InFlight(collector)
    rows = []
    for episode_id, flight in collector.flights.items():
        arrival = flight.arrival
        if not isinstance(arrival, EpisodeCompleted) or flight.late or episode_id in interrupted:
            continue
        if arrival.t <= flight.t:
            continue
        running = inflight.mean(flight.t, arrival.t) / servers
        seconds = pauses.generation_s(flight.t, arrival.t)
        rows.append((seconds, float(arrival.completion_tokens), running))
    return rows


def _least_squares(rows: np.ndarray, servers: int) -> DecodeFit:
    """seconds = overhead + tokens·a + tokens·running·b, by least squares."""
    seconds, tokens, running = rows[:, 0], rows[:, 1], rows[:, 2]
    design = np.column_stack([np.ones_like(tokens), tokens, tokens * running])
    (overhead, a, b), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    residual = seconds - design @ np.array([overhead, a, b])
    spread = float(np.sum((seconds - seconds.mean()) ** 2))
    return DecodeFit(
        decode_step_s=float(a),
        decode_s_per_seq=float(b),
        overhead_s=float(overhead),
        servers=servers,
        episodes=len(rows),
        running_min=float(running.min()),
        running_max=float(running.max()),
        r_squared=1.0 - float(np.sum(residual**2)) / spread if spread > 0 else 1.0,
    )


class _InFlight:
    """Episodes in flight over time, as a step function with its running integral."""

    def __init__(self, collector: LogCollector) -> None:
        changes: list[tuple[float, int]] = []
        for flight in collector.flights.values():
            ends = [t for t in (flight.cancelled_t, flight.arrival and flight.arrival.t) if t]
            changes += [(flight.t, 1), (min(ends) if ends else collector.end_t, -1)]
        changes.sort()
        times = np.array([t for t, _ in changes])
        counts = np.cumsum([step for _, step in changes])  # in flight from times[i] on
        self.times = times
        self.counts = counts
        self.area = np.concatenate([[0.0], np.cumsum(counts[:-1] * np.diff(times))])

    def integral(self, t: float) -> float:
        """Episode-seconds in flight from the start to `t`."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        if i < 0:
            return 0.0
        return float(self.area[i] + self.counts[i] * (t - self.times[i]))

    def mean(self, start: float, end: float) -> float:
        """The time average of the episodes in flight over [start, end]."""
        return (self.integral(end) - self.integral(start)) / (end - start)
