"""Fit a simulator world to a recorded log: the outcomes, the trainer's times, the controller.

One pass over the log collects the world's side of the run (never what the deciders
decided): when each episode was dispatched and how it ended, when each batch shipped and
each version went pending and live, and the controller's events. From them:

- **Generation seconds.** An episode's duration is dispatch → arrival (or → cancellation,
  when it was cancelled: a censored duration). If the recorded inference paused during
  weight updates, the update windows (`version_pending` → `version_live`) are taken out,
  since the simulator adds the pauses back. Whether it paused is read from the log: it did
  when no completion or failure ever arrived strictly inside an update window.
- **The trainer.** The trainer trains one batch at a time: batch s starts at
  max(its `batch_shipped`, the previous `version_live`) and trains until
  `version_pending(s)`; the update lasts until `version_live(s)`. Batches whose version was
  skipped share the training time of the chain they were trained in.
- **Rates** the simulator draws for work the run never did: `version_skip_rate`, and
  `late_arrival_rate` (how often an abort loses its race), fitted by maximum likelihood
  from the cancellations whose lost race the log could have shown.

The trainer's busy seconds are kept for the recorded figures (`trainer_idle_fraction`).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodesCancelled,
    Event,
    GroupOpened,
    LimitSet,
    OverloadCut,
    RunStarted,
    VersionLive,
    VersionPending,
)
from rolloutlog.runtime.sim.scenario import Scenario, resolve_overrides
from rolloutlog.runtime.sim.trace import (
    RecordedBatch,
    RecordedControl,
    RecordedEpisode,
    Trace,
    refuse_unread_world_keys,
)
from rolloutlog.runtime.sim.trace_world import TraceTasks
from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.interval import RaceSample


class FitError(ValueError):
    """The log cannot be fitted (no `run_started`, nothing finished); names the problem."""


@attrs.frozen(kw_only=True)
class FittedRun:
    """A recorded run's fitted world, as a scenario, and what the recorded figures need."""

    scenario: Scenario
    virtual_seconds: float
    trainer_busy_s: float
    races: RaceSample  # the races the fitted late-arrival rate rests on

    @property
    def trace(self) -> Trace:
        """The recorded world (never None for a fitted run)."""
        if self.scenario.trace is None:
            raise ValueError("a fitted run always has a trace")
        return self.scenario.trace


@attrs.define(slots=True)
class _Flight:
    t: float
    task_id: str
    cancelled_t: float | None = None
    arrival: EpisodeCompleted | EpisodeFailed | None = None
    late: bool = False


@attrs.define
class LogCollector:
    """The world's side of a log, gathered in one pass."""

    started: RunStarted | None = None
    tasks: dict[str, str] = attrs.Factory(dict)
    flights: dict[str, _Flight] = attrs.Factory(dict)
    shipped: dict[int, float] = attrs.Factory(dict)
    batch_tokens: dict[int, int] = attrs.Factory(dict)
    pending: dict[int, float] = attrs.Factory(dict)
    live: dict[int, float] = attrs.Factory(dict)
    controls: list[RecordedControl] = attrs.Factory(list)
    interrupted: set[str] = attrs.Factory(set)
    end_t: float = 0.0

    def observe(self, event: Event) -> None:
        self.end_t = max(self.end_t, event.t)
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, GroupOpened):
            self.tasks[event.group_id] = event.task_id
        elif isinstance(event, EpisodeDispatched):
            self.flights[event.episode_id] = _Flight(event.t, self.tasks[event.group_id])
        elif isinstance(event, EpisodeCompleted | EpisodeFailed):
            flight = self.flights[event.episode_id]
            flight.arrival, flight.late = event, flight.cancelled_t is not None
        elif isinstance(event, EpisodesCancelled):
            for episode_id in event.episode_ids:
                self.flights[episode_id].cancelled_t = event.t
        elif isinstance(event, BatchShipped):
            self.shipped[event.step] = event.t
            self.batch_tokens[event.step] = event.tokens
        elif isinstance(event, VersionPending):
            self.pending[event.version] = event.t
        elif isinstance(event, VersionLive):
            self.live[event.version] = event.t
        elif isinstance(event, LimitSet):
            self.controls.append(RecordedControl(t=event.t, kind="limit", value=event.max_inflight))
        elif isinstance(event, OverloadCut):
            self.controls.append(RecordedControl(t=event.t, kind="overload", value=event.n))
        elif isinstance(event, EpisodeInterrupted):
            self.interrupted.add(event.episode_id)


class UpdatePauses:
    """The weight-update windows, to take out of durations when inference paused."""

    def __init__(self, collector: LogCollector) -> None:
        windows = [
            (collector.pending[v], collector.live[v])
            for v in sorted(collector.live)
            if v in collector.pending and collector.live[v] > collector.pending[v]
        ]
        self.starts = [a for a, _ in windows]
        self.windows = windows
        arrivals = [f.arrival.t for f in collector.flights.values() if f.arrival is not None]
        self.paused = not any(self._inside(t) for t in arrivals)

    def _inside(self, t: float) -> bool:
        index = bisect.bisect_right(self.starts, t) - 1
        return index >= 0 and self.windows[index][0] < t < self.windows[index][1]

    def generation_s(self, start: float, end: float) -> float:
        """Seconds in [start, end] outside the update windows (all of them if no pause)."""
        seconds = end - start
        if not self.paused:
            return max(seconds, 0.0)
        for a, b in self.windows[max(bisect.bisect_right(self.starts, start) - 1, 0) :]:
            if a >= end:
                break
            seconds -= max(0.0, min(b, end) - max(a, start))
        return max(seconds, 0.0)


def _episodes(collector: LogCollector, pauses: UpdatePauses) -> list[RecordedEpisode]:
    episodes = []
    for episode_id, flight in collector.flights.items():
        arrival, cut_t = flight.arrival, flight.cancelled_t
        # a cancellation's race shows only while the log goes on; still in flight at the end: 0
        watched_s = math.inf if cut_t is None else pauses.generation_s(cut_t, collector.end_t)
        if arrival is None:  # cancelled (or still in flight when the log ends): censored
            episode = RecordedEpisode(
                episode_id=episode_id,
                task_id=flight.task_id,
                outcome="censored",
                seconds=pauses.generation_s(flight.t, collector.end_t if cut_t is None else cut_t),
                watched_s=0.0 if cut_t is None else watched_s,
            )
        else:
            episode = RecordedEpisode(
                episode_id=episode_id,
                task_id=flight.task_id,
                outcome="failed",
                seconds=pauses.generation_s(flight.t, arrival.t),
                late=flight.late,
                watched_s=watched_s,
            )
            if isinstance(arrival, EpisodeCompleted):
                episode = attrs.evolve(
                    episode,
                    outcome="completed",
                    reward=arrival.reward,
                    prompt_tokens=arrival.prompt_tokens,
                    completion_tokens=arrival.completion_tokens,
                )
        episodes.append(episode)
    return episodes


@attrs.frozen
class TrainWindow:
    """The trainer trained `batches` shipped batches of `tokens` from `start` to `end` (its
    publish), then updated until `live`."""

    start: float
    end: float
    live: float
    tokens: int
    batches: int


def train_windows(collector: LogCollector) -> list[TrainWindow]:
    """When the trainer trained, batch chain by batch chain (`_batches`' reading)."""
    return _batches(collector)[2]


def _batches(collector: LogCollector) -> tuple[list[RecordedBatch], float, list[TrainWindow]]:
    """The trainer's batch times, its busy seconds up to the end of the log, and when it
    trained."""
    batches: list[RecordedBatch] = []
    windows: list[TrainWindow] = []
    busy_s, free_t = 0.0, 0.0
    chain: list[int] = []  # batches trained back to back, the last one not yet published
    for step in sorted(collector.shipped):
        chain.append(step)
        pending_t = collector.pending.get(step)
        if pending_t is None:
            continue
        start = max(collector.shipped[chain[0]], free_t)
        live_t = collector.live.get(step)
        if live_t is None:  # the update of the last version never finished
            break
        train_s = max(pending_t - start, 0.0) / len(chain)
        batches += [
            RecordedBatch(step=s, train_s=train_s, update_s=0.0, skipped=True) for s in chain[:-1]
        ]
        batches.append(RecordedBatch(step=step, train_s=train_s, update_s=live_t - pending_t))
        tokens = sum(collector.batch_tokens[s] for s in chain)
        windows.append(TrainWindow(start, max(pending_t, start), live_t, tokens, len(chain)))
        busy_s += live_t - start
        free_t, chain = live_t, []
    if chain:
        busy_s += max(collector.end_t - max(collector.shipped[chain[0]], free_t), 0.0)
    return batches, busy_s, windows


RACE_QUANTILES = 64  # draws per cancellation to weigh whether its race could show
RATE_BISECTIONS = 60


def _race_weights(episodes: Sequence[RecordedEpisode]) -> tuple[int, list[float]]:
    """The late arrivals, and for each other cancellation the chance a lost race would show.

    A lost race shows as a completion arriving after its cancellation, when the episode
    comes due; one due after the log ended never shows (at shutdown, none can). The chance
    is `w = P(D - c <= watched_s | D > c)`, the duration D drawn as the fitted world draws
    the episode past its cut c.
    """
    late = sum(e.late for e in episodes)
    cut = [e for e in episodes if e.outcome == "censored" and e.watched_s > 0.0]
    if not cut:
        return late, []
    tasks = TraceTasks(Trace(episodes=tuple(episodes)))
    quantiles = [(k + 0.5) / RACE_QUANTILES for k in range(RACE_QUANTILES)]
    weights = [
        sum(tasks.draw(e.task_id, u, e.seconds).seconds - e.seconds <= e.watched_s
            for u in quantiles) / RACE_QUANTILES
        for e in cut
    ]  # fmt: skip
    return late, weights


def observed_races(episodes: Sequence[RecordedEpisode]) -> tuple[int, float]:
    """(late arrivals, races the log could show): the late ones plus each other
    cancellation weighted by the chance a lost race of it would have shown."""
    late, weights = _race_weights(episodes)
    return late, late + sum(weights)


def late_arrival_rate(episodes: Sequence[RecordedEpisode]) -> float:
    """How often an abort loses its race: the maximum-likelihood rate from the cancellations.

    A cancellation without a late arrival won its race only with the probability `w` that a
    lost one would have shown (`_race_weights`), so the rate p maximises
    prod_late p * prod_others (1 - p w). Counting every cancellation as a won race instead
    draws too few late arrivals: on a per-episode log of the default scenario, a third of
    the cancellations are at shutdown, where no race can show.
    """
    return _rate(*_race_weights(episodes))


def _rate(late: int, weights: Sequence[float]) -> float:
    """`late_arrival_rate` from the late arrivals and the other cancellations' weights."""
    if late == 0:
        return 0.0

    def score(p: float) -> float:  # d/dp of the log-likelihood, decreasing in p
        return late / p - sum(w / (1.0 - p * w) for w in weights)

    if all(w < 1.0 for w in weights) and score(1.0) >= 0.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(RATE_BISECTIONS):
        middle = (low + high) / 2.0
        low, high = (middle, high) if score(middle) > 0.0 else (low, middle)
    return (low + high) / 2.0


def _world(
    pauses: UpdatePauses,
    episodes: list[RecordedEpisode],
    batches: list[RecordedBatch],
    late_rate: float,
) -> WorldConfig:
    """The knobs the trace world reads, plus the recorded means (for reading, and fallbacks)."""
    finished = [e for e in episodes if e.outcome != "censored"]
    completed = [e for e in finished if e.outcome == "completed"]
    timed = [b for b in batches if not b.skipped]
    world: dict[str, Any] = {
        "pause_inference_on_update": pauses.paused,
        "late_arrival_rate": late_rate,
        "version_skip_rate": sum(b.skipped for b in batches) / len(batches) if batches else 0.0,
        "failure_rate": (len(finished) - len(completed)) / len(finished),
        "trainer_jitter": 0.0,
        "train_s_per_episode": 0.0,
        "limit_interval_s": 0.0,
        "overload_interval_s": 0.0,
    }
    if completed:
        world["prompt_tokens"] = round(statistics.median(e.prompt_tokens for e in completed))
        world["task_length_tokens"] = max(
            1, round(statistics.median(e.completion_tokens for e in completed))
        )
    if timed:
        world["train_step_s"] = statistics.fmean(b.train_s for b in timed)
        world["weight_update_s"] = statistics.fmean(b.update_s for b in timed)
    return WorldConfig.from_mapping(world, where="fitted world")


def collect(events: Iterable[Event]) -> LogCollector:
    """The world's side of a log; an event naming what no event before it opened is a
    `FitError` that says so."""
    collector = LogCollector()
    for event in events:
        try:
            collector.observe(event)
        except KeyError as error:  # an inconsistent log: `whatif` names it as replay does
            raise FitError(
                f"seq {event.seq} ({event.kind}) names {error.args[0]}, which no event before "
                "it opened"
            ) from error
    return collector


def fit_log(events: Iterable[Event], *, seed: int = 0, name: str = "recorded") -> FittedRun:
    """Fit the world of a recorded log; `seed` seeds the draws for unfinished work."""
    collector = collect(events)
    started = collector.started
    if started is None:
        raise FitError("the log has no run_started: nothing to fit")
    try:
        run = RunConfig.from_mapping(started.config, where="run_started.config")
    except ConfigError as error:
        raise FitError(str(error)) from error
    pauses = UpdatePauses(collector)
    episodes = _episodes(collector, pauses)
    if not any(e.outcome != "censored" for e in episodes):
        raise FitError("the log has no completed or failed episode: no outcome to draw from")
    batches, busy_s, _ = _batches(collector)
    late, weights = _race_weights(episodes)
    trace = Trace(
        seed=seed,
        episodes=tuple(episodes),
        batches=tuple(batches),
        controls=tuple(collector.controls),
    )
    scenario = Scenario(
        name=name,
        description=(
            f"World fitted to the recorded run {name!r}: the [trace] table holds its episode "
            "outcomes, batch times and controller events; of [world], the trace world reads "
            "pause_inference_on_update, late_arrival_rate and version_skip_rate (the rest is "
            "recorded means, for reading)."
        ),
        steps=max(max(collector.shipped, default=1), 1),
        seed=run.seed,
        run=run,
        world=_world(pauses, episodes, batches, _rate(late, weights)),
        trace=trace,
    )
    return FittedRun(
        scenario=scenario,
        virtual_seconds=collector.end_t,
        trainer_busy_s=busy_s,
        races=RaceSample(late, late + sum(weights)),
    )


def with_overrides(scenario: Scenario, overrides: Mapping[str, Any]) -> Scenario:
    """The scenario with `--set` overrides (`run.key`, `world.key`, or unambiguous) applied."""
    resolved = resolve_overrides(overrides)
    run = {k.partition(".")[2]: v for k, v in resolved.items() if k.startswith("run.")}
    world = {k.partition(".")[2]: v for k, v in resolved.items() if k.startswith("world.")}
    changed = scenario.with_run(**run) if run else scenario
    if world:
        if scenario.trace is not None:
            shared = world.get("inference", scenario.world.inference) == "shared"
            refuse_unread_world_keys(world, shared=shared)
        merged = WorldConfig.from_mapping({**scenario.world.to_dict(), **world}, where="world")
        changed = attrs.evolve(changed, world=merged)
    return changed
