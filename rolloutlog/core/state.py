"""The deciders' states, as plain data: what each has seen, never what the policy chose.

The dispatcher's (`DispatcherState`: permits, open groups, the train ledger admission reads,
interrupted episodes) and the sink's (`SinkState`: open groups, arrivals, the queue, the
segments `stale_tokens = mask` reads). The rule table a run's policy chose travels beside
them (`core.rules.table.Rules`, built by `core.presets.rules_for`), so these classes import
no rule and every rule family may import them.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.curriculum import Curriculum, curriculum_named
from rolloutlog.core.staleness import is_stale
from rolloutlog.core.tasks import Task, task_for_group
from rolloutlog.events.types import Work

# (config, group number, work) -> the task a new group g<number> works on.
TaskSource = Callable[[RunConfig, int, Work], Task]

# --- the dispatcher's ----------------------------------------------------------------------


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
class TrainLedger:
    """Counts of train episodes by where they stand; bounded by what is open and in flight."""

    inflight: set[str] = attrs.Factory(set)
    arrived: int = 0
    queued: int = 0
    batches: int = 0
    unscored: dict[str, int] = attrs.Factory(dict)  # open train group -> unfinalized arrivals
    arrival_tokens: int = 0
    arrivals: int = 0
    owed: int = 0  # members open train groups still owe (AReaL admission)
    redundancy: int = 0  # r: each group owes G + r members (`core.rules.group_shape`)
    roll_used: int = 0  # train groups opened and not aborted (ROLL admission)
    aborted: set[str] = attrs.Factory(set)  # open train groups cancelled as stale, once each
    accepted: int = 0  # train episodes ever admitted (AReaL admission: in groups of G)
    # verl admission's sync window (`core.rules.admission_budget`), counted in episodes:
    window_queued: int = 0  # queued at the last version_pending, and queued by groups since
    window_kept: dict[str, int] = attrs.Factory(dict)  # open train group -> members not cancelled
    window_lost: dict[str, set[str]] = attrs.Factory(dict)  # open group -> failed or dropped
    pending: dict[str, int] = attrs.Factory(dict)  # group -> members queued or unpublished
    unpublished: dict[int, tuple[str, ...]] = attrs.Factory(dict)  # step -> its batch's ids
    opened_groups: int = 0  # train groups ever opened (max-lag admission)
    failed: dict[str, int] = attrs.Factory(dict)  # open train group -> members failed (ROLL)
    roll_lost: int = 0  # members failed in scored groups not aborted (ROLL admission)
    updates: int = 0  # versions announced (max-lag admission)
    round_groups: dict[str, int] = attrs.Factory(dict)  # this step's train groups: size
    round_opened: int = 0  # their members (slime admission, `core.rules.oversampling`)
    round_lost: int = 0  # their members that will not reach the queue (slime admission)
    open_sizes: dict[str, int] = attrs.Factory(dict)  # open train groups: size (recycling)

    def beyond_trainer(self) -> int:
        """queued + arrived-unfinalized + in-flight: promised work not yet trained."""
        return self.queued + self.arrived + len(self.inflight)


@attrs.define(slots=True)
class Interruptions:
    """The version inference serves and the episodes interrupted, not yet resumed."""

    live: int = 0
    interrupted: dict[str, None] = attrs.Factory(dict)
    recycled: dict[str, int] = attrs.Factory(dict)  # recycled -> the version live at its abort
    recycling: bool = False  # a batch shipped under `recycle`; the next version is not live
    resumed: dict[str, int] = attrs.Factory(dict)  # under `mask`: in flight -> last resumed at

    def forget(self, episode_ids: tuple[str, ...]) -> None:
        """Cancelled episodes are no longer owed a resumption."""
        if self.interrupted:
            for episode_id in episode_ids:
                self.interrupted.pop(episode_id, None)
                self.recycled.pop(episode_id, None)


@attrs.define(slots=True)
class DispatcherState:
    """Permits, open groups, the policy version and step, the gate's inputs.

    Bounded by what is in flight and open: finished groups leave `groups`, and a late
    completion is recognised by its absence from `inflight`, not by a history of ids.
    """

    config: RunConfig
    limit: int
    step: int = 1
    version: int = 0
    update_step: int = 1  # the step the last version_pending found, before a batch it released
    gate_version: int = 0  # the version at the last ship or version_live (prime-rl's gate)
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
    # group of the same task, once, when the run's `requeue_order` says (`discarded`: every group
    # whose task was requeued). The task of a group that was itself a requeue is kept (the
    # task source names only fresh groups' tasks). One entry per requeue.
    requeue: dict[str, None] = attrs.Factory(dict)
    discarded: set[str] = attrs.Factory(set)
    # Under `requeue_order = "behind-fresh"`, tinker's builder queue (`core.rules.
    # requeue_order`): its builders and waiting puts (True: a requeued group's), and the
    # requeues not yet put back; empty under any other order.
    builders: list[bool] = attrs.Factory(list)
    putters: list[bool] = attrs.Factory(list)
    requeues_arriving: int = 0
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


def initial_dispatcher_state(
    config: RunConfig, task_source: TaskSource = task_for_group
) -> DispatcherState:
    """The dispatcher before `run_started`: no permits held, version 0, step 1."""
    return DispatcherState(
        config=config,
        limit=config.max_inflight,
        task_source=task_source,
        ledger=TrainLedger(redundancy=config.group_redundancy),
    )


# --- the sink's ---------------------------------------------------------------------------

Segment = tuple[int, int]  # (the version that generated it, its completion tokens)


@attrs.define(slots=True)
class Pieces:
    """An in-flight episode's interruptions: its tokens at each, the versions it resumed at."""

    tokens: list[int] = attrs.Factory(list)
    versions: list[int] = attrs.Factory(list)


@attrs.define(slots=True)
class Arrival:
    """An episode that reached the sink: `reward` is None when it failed."""

    episode_id: str
    member: int
    version: int
    reward: float | None
    tokens: int
    dropped: bool = False
    segments: tuple[Segment, ...] = ()  # under `stale_tokens = mask` (`core.sink_mask`)


@attrs.define(slots=True)
class SinkGroup:
    """A group the sink has not finalized yet."""

    group_id: str
    task_id: str
    env: str
    train: bool
    frozen: bool
    size: int
    inflight: dict[str, int] = attrs.Factory(dict)  # dispatched, not arrived: id -> version
    arrived: list[Arrival] = attrs.Factory(list)
    # the same arrivals by episode id: a drop names its episode, looked up, not searched
    arrival_of: dict[str, Arrival] = attrs.Factory(dict)
    cancelled: int = 0
    stale_cancelled: int = 0
    step: int = 1  # the step it opened at: a leftover once that batch shipped (slime)

    def complete(self) -> bool:
        """Finalization rule: arrived + Σ cancellation counts == G."""
        return len(self.arrived) + self.cancelled == self.size

    def is_stale(self, version: int, step: int, bound: int) -> bool:
        """Whether a member dispatched at `version` is past the bound at `step`."""
        return is_stale(version, step, bound, train=self.train, frozen=self.frozen)


@attrs.define(slots=True)
class Queued:
    """An admitted episode waiting for a batch."""

    version: int
    advantage: float
    tokens: int
    frozen: bool
    segments: tuple[Segment, ...] = ()  # under `stale_tokens = mask` (`core.sink_mask`)


@attrs.define(slots=True)
class IdleWork:
    """Finalized train work since something was last admitted, for the zero-output guard."""

    episodes: int = 0
    stale: int = 0
    rejected_groups: int = 0
    unscored_groups: int = 0


@attrs.define(slots=True)
class SinkState:
    """Open groups, the queue, the step and version; bounded by what is open and queued."""

    config: RunConfig
    admit: Curriculum
    step: int = 1
    version: int = 0
    live: int = 0  # the version inference serves (`version_live`): the update pause reads it
    groups: dict[str, SinkGroup] = attrs.Factory(dict)
    inflight: dict[str, str] = attrs.Factory(dict)  # dispatched episode id -> group id
    queue: dict[str, Queued] = attrs.Factory(dict)  # in queue order, oldest first
    queued_tokens: int = 0
    idle: IdleWork = attrs.Factory(IdleWork)
    completed: int = 0  # completed arrivals, and their tokens: the mean sizes a token batch
    completed_tokens: int = 0
    finished: bool = False  # after run_finished groups are still scored, never trained
    checked_step: int = 0  # the step a train group last finalized at (a readiness check)
    first_check: bool = False  # that group_scored was the first of a train group at its step
    pieces: dict[str, Pieces] = attrs.Factory(dict)  # interrupted in flight, under `mask`


def initial_sink_state(config: RunConfig) -> SinkState:
    """The sink before `run_started`: step 1, version 0, nothing queued."""
    return SinkState(config=config, admit=curriculum_named(config.curriculum))
