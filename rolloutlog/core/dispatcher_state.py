"""The dispatcher's state: permits, open groups, the policy version and step, the gate."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.dispatcher_partial import Interruptions
from rolloutlog.core.presets import Rules, rules_for
from rolloutlog.core.rules.admission import TrainLedger
from rolloutlog.core.tasks import Task, task_for_group
from rolloutlog.events.types import Work

# (config, group number, work) -> the task a new group g<number> works on.
TaskSource = Callable[[RunConfig, int, Work], Task]


@attrs.define(slots=True)
class OpenGroup:
    """A group that still owes the dispatcher something: in-flight or unscheduled members."""

    group_id: str
    number: int
    train: bool
    frozen: bool
    size: int  # members it dispatches: G, or G + r under `group_redundancy`
    start_version: int
    step: int = 1  # the step it opened at (slime's abort takes only earlier steps' groups)
    dispatched: int = 0
    unscheduled: int = 0
    arrived: int = 0  # completed or failed: the G-th cancels the rest (`core.rules.group_shape`)
    inflight: dict[str, int] = attrs.Factory(dict)  # episode id -> its dispatch version
    arrived_versions: list[int] = attrs.Factory(list)  # of completed members, for stragglers

    def owed(self) -> int:
        """Members not yet accounted for: in flight or never dispatched."""
        return len(self.inflight) + self.unscheduled


@attrs.define(slots=True)
class DispatcherState:
    """Permits, open groups, the policy version and step, the gate's inputs.

    Bounded by what is in flight and open: finished groups leave `groups`, and a late
    completion is recognised by its absence from `inflight`, not by a history of ids.
    """

    config: RunConfig
    rules: Rules  # what the run's policy chose from the rule families (`core.presets`)
    limit: int
    step: int = 1
    version: int = 0
    groups_opened: int = 0
    groups: dict[str, OpenGroup] = attrs.Factory(dict)  # in opening order
    owing: dict[str, None] = attrs.Factory(dict)  # groups with unscheduled members, in order
    inflight: dict[str, str] = attrs.Factory(dict)  # episode id -> group id; one per permit
    eval_owed: int = 0
    window: int = -1
    window_start: float | None = None  # a restarting window's opening time (`core.rules`)
    window_growth: int = 0
    late_events: int = 0
    finished: bool = False
    ledger: TrainLedger = attrs.Factory(TrainLedger)
    # Groups the sink discarded for requeue, oldest first; each is opened again as a new
    # group of the same task before any fresh train group, once (`discarded`: every group
    # whose task was requeued). The task of a group that was itself a requeue is kept (the
    # task source names only fresh groups' tasks). One entry per requeue.
    requeue: dict[str, None] = attrs.Factory(dict)
    discarded: set[str] = attrs.Factory(set)
    requeued_tasks: dict[str, Task] = attrs.Factory(dict)
    # Which task each new group gets: the seeded source, or (checking another orchestrator's
    # log) the tasks that log recorded.
    task_source: TaskSource = task_for_group
    # Interrupted episodes and the version inference serves (`core.dispatcher_partial`).
    partial: Interruptions = attrs.Factory(Interruptions)

    def task_of(self, group_id: str) -> Task:
        """The task of train group `group_id`: its requeued task, or the task source's."""
        task = self.requeued_tasks.get(group_id)
        return self.task_source(self.config, int(group_id[1:]), "train") if task is None else task

    def gated(self) -> bool:
        """Train dispatch pauses while the trainer lags the step by more than the run's lag
        (`target_lag`, or prime-rl's 1: `state.rules.lag`), and, under `weight_update =
        drain`, while an update waits for the train work in flight; under `recycle`, until
        every recycled episode is resumed (they go first)."""
        if self.config.weight_update == "drain" and self.partial.live < self.version:
            return True
        if self.partial.recycled:
            return True
        return (self.step - 1) - self.version > self.rules.lag(self.config)


def initial_state(config: RunConfig, task_source: TaskSource = task_for_group) -> DispatcherState:
    """The dispatcher before `run_started`: no permits held, version 0, step 1."""
    return DispatcherState(
        config=config,
        rules=rules_for(config),
        limit=config.max_inflight,
        task_source=task_source,
        ledger=TrainLedger(redundancy=config.group_redundancy),
    )
