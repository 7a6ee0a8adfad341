"""The recorded run's own figures, with the definitions `simulate --json` uses.

The log is folded by replay's `LogFold` (every key of `replay --json`, the age split
of `StepMetrics`) while the
simulator's `SimMetrics` is fed the same facts a simulation would feed it: each episode's
generation seconds come from the fitted trace, so fates, wasted time and the selection-bias
ratios (task length = the task's mean completion tokens, solve rate = its mean reward, as
the trace world defines them) are measured the same way on both sides of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
)
from rolloutlog.replay.fold import LogFold
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.runtime.sim.metrics import SimMetrics
from rolloutlog.runtime.sim.trace import RecordedEpisode
from rolloutlog.runtime.sim.trace_world import TraceTasks
from rolloutlog.runtime.sim.world import EpisodePlan
from rolloutlog.studies.whatif.fit import FitError, FittedRun


def recorded_report(
    events: Iterable[Event], fitted: FittedRun
) -> tuple[dict[str, Any], SimMetrics]:
    """The recorded run's `simulate --json` keys (replay summary + simulator metrics)."""
    trace = fitted.trace
    tasks = TraceTasks(trace)
    recorded = _Recorded({e.episode_id: e for e in trace.episodes})
    groups: dict[str, tuple[str, bool]] = {}
    plans: dict[str, EpisodePlan] = {}
    racing: dict[str, str] = {}  # cancelled episodes that arrive late: their cancel reason
    metrics = SimMetrics()
    ages = StepMetrics()
    fold: LogFold | None = None
    for event in events:
        if fold is None:
            fold = LogFold.from_run_started(event)
        fold.apply(event)
        ages.observe(event)
        if isinstance(event, GroupOpened):
            groups[event.group_id] = (event.task_id, event.work == "train")
        elif isinstance(event, EpisodeDispatched):
            plan = _plan(recorded[event.episode_id], tasks, *groups[event.group_id])
            plans[event.episode_id] = plan
            metrics.on_dispatched(plan)
        elif isinstance(event, EpisodeCompleted | EpisodeFailed):
            episode_id = event.episode_id
            metrics.on_arrived(episode_id, plans.pop(episode_id), racing.pop(episode_id, None))
        elif isinstance(event, EpisodesCancelled):
            for episode_id in event.episode_ids:
                if recorded[episode_id].late:
                    racing[episode_id] = event.reason
                else:
                    plans.pop(episode_id)
                    metrics.on_cancelled(event.reason, recorded[episode_id].seconds)
        elif isinstance(event, EpisodeDropped):
            metrics.on_dropped(event.episode_id, event.reason)
        elif isinstance(event, GroupScored):
            metrics.on_scored(event)
        elif isinstance(event, BatchShipped):
            metrics.on_shipped(event)
    if fold is None:
        raise FitError("the log is empty")
    fold.finish()
    metrics.on_finished(fitted.virtual_seconds, [])
    figures = metrics.as_dict(fitted.virtual_seconds, fitted.trainer_busy_s)
    return {**fold.summary(), **ages.run_values(), **figures}, metrics


class _Recorded(dict[str, RecordedEpisode]):
    """The fitted trace's episodes by id; one the trace lacks is a `FitError` naming it
    (the events read differ from those fitted), not a `KeyError`."""

    def __missing__(self, episode_id: str) -> RecordedEpisode:
        raise FitError(f"episode {episode_id} is not in the fitted trace")


def _plan(episode: RecordedEpisode, tasks: TraceTasks, task_id: str, train: bool) -> EpisodePlan:
    """What the trace world would plan for this episode (its recorded outcome)."""
    return EpisodePlan(
        task=tasks.task(task_id),
        train=train,
        work_s=episode.seconds,
        failed=episode.outcome == "failed",
        reward=episode.reward,
        completion_tokens=episode.completion_tokens,
        late_if_cancelled=episode.late,
        prompt_tokens=episode.prompt_tokens,
        race_drawn=False,
    )
