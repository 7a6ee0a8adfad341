"""The event vocabulary of docs/contract.md: one frozen, slotted attrs class per kind.

Events are facts, named in the past tense, and never edited. Every event carries `t`
(seconds: virtual in simulation, since run start in the live runtime) and `seq` (0-based, gap-free).
`seq` is assigned when the event is appended to a log; until then it is `UNSEQUENCED`, so
that deciders can build events without knowing where they will land.

All classes are keyword-only: field order carries no meaning, names do. Sequences are
tuples so that an event stays immutable and hashable-by-value where its fields allow.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

UNSEQUENCED: Final = -1

Work: TypeAlias = Literal["train", "eval"]
CancelReason: TypeAlias = Literal[
    "stale", "overload", "straggler", "shutdown", "restart", "leftover", "redundant"
]
DropReason: TypeAlias = Literal["stale", "requeue", "withheld", "evicted", "leftover"]
InterruptReason: TypeAlias = Literal["update", "recycle"]

WORK_KINDS: Final = ("train", "eval")
# Reasons only a policy key off by default gives (`leftovers`, `group_redundancy`): the
# summaries list them only where a run has one, so a default run's figures read as they did.
OPTIONAL_CANCEL_REASONS: Final = ("leftover", "redundant")
CANCEL_REASONS: Final = (
    "stale",
    "overload",
    "straggler",
    "shutdown",
    "restart",
    *OPTIONAL_CANCEL_REASONS,
)
ALWAYS_CANCEL_REASONS: Final = CANCEL_REASONS[: -len(OPTIONAL_CANCEL_REASONS)]
DROP_REASONS: Final = ("stale", "requeue", "withheld", "evicted", "leftover")
INTERRUPT_REASONS: Final = ("update", "recycle")


@attrs.frozen(kw_only=True)
class RunStarted:
    """The driver opened the run; always seq 0. `config` is the run configuration as plain data."""

    kind: ClassVar[str] = "run_started"
    t: float
    seq: int = UNSEQUENCED
    config: dict[str, Any] = attrs.field(hash=False)
    seed: int
    schema_version: int
    code_version: str


@attrs.frozen(kw_only=True)
class GroupOpened:
    """The dispatcher opened a GRPO group; `policy_version` is the version at its start.

    `frozen`: the group samples from a frozen policy (`env = "frozen"`), not from the policy
    being trained, so its episodes never go stale.
    """

    kind: ClassVar[str] = "group_opened"
    t: float
    seq: int = UNSEQUENCED
    group_id: str
    work: Work
    env: str
    task_id: str
    group_size: int
    policy_version: int
    step: int
    frozen: bool


@attrs.frozen(kw_only=True)
class EpisodeDispatched:
    """One member went to inference; `policy_version` is its own dispatch version."""

    kind: ClassVar[str] = "episode_dispatched"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    group_id: str
    member: int
    policy_version: int


@attrs.frozen(kw_only=True)
class EpisodeCompleted:
    """Inference finished an episode and the environment scored it."""

    kind: ClassVar[str] = "episode_completed"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    reward: float
    prompt_tokens: int
    completion_tokens: int


@attrs.frozen(kw_only=True)
class EpisodeFailed:
    """Inference or the environment failed an episode; it arrives at the sink unscored."""

    kind: ClassVar[str] = "episode_failed"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    error: str


@attrs.frozen(kw_only=True)
class EpisodesCancelled:
    """The dispatcher cancelled in-flight members (`episode_ids`) and `unscheduled` more."""

    kind: ClassVar[str] = "episodes_cancelled"
    t: float
    seq: int = UNSEQUENCED
    group_id: str
    episode_ids: tuple[str, ...]
    unscheduled: int
    reason: CancelReason


@attrs.frozen(kw_only=True)
class VersionPending:
    """The trainer published `version`; episodes dispatched from now on are stamped with it."""

    kind: ClassVar[str] = "version_pending"
    t: float
    seq: int = UNSEQUENCED
    version: int


@attrs.frozen(kw_only=True)
class VersionLive:
    """`version` is loaded on every inference endpoint and inference resumed."""

    kind: ClassVar[str] = "version_live"
    t: float
    seq: int = UNSEQUENCED
    version: int


@attrs.frozen(kw_only=True)
class LimitSet:
    """The concurrency controller moved the permit limit; lowering it cancels nothing."""

    kind: ClassVar[str] = "limit_set"
    t: float
    seq: int = UNSEQUENCED
    max_inflight: int


@attrs.frozen(kw_only=True)
class OverloadCut:
    """The concurrency controller asked to shed at least `n` episodes."""

    kind: ClassVar[str] = "overload_cut"
    t: float
    seq: int = UNSEQUENCED
    n: int


@attrs.frozen(kw_only=True)
class EpisodeDropped:
    """The sink dropped an arrived or queued episode that was past the bound at `age`.

    `reason` is `stale`, or `requeue` when the run's policy discards the episode's whole
    group and requeues its task: the dispatcher then opens that task again as a new group,
    or `withheld` when the run's policy (`stale_member = "withhold"`) scored the stale
    member with its group (the `group_scored` just before) and keeps its tokens from training,
    or `evicted` when a bounded queue (`queue_limit`) dropped a queued episode of any age to
    make room for an admitted group.
    """

    kind: ClassVar[str] = "episode_dropped"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    reason: DropReason
    age: int


@attrs.frozen(kw_only=True)
class GroupScored:
    """A group finalized: its scored members, their advantages, and the curriculum's verdict."""

    kind: ClassVar[str] = "group_scored"
    t: float
    seq: int = UNSEQUENCED
    group_id: str
    episode_ids: tuple[str, ...]
    advantages: tuple[float, ...]
    admitted: bool


@attrs.frozen(kw_only=True)
class BatchShipped:
    """Batch `step` went to the trainer: `episode_ids` were cut, `trained_ids` survived pruning.

    `masked_tokens` (schema 3) of the trained episodes' `tokens` carry no gradient: the
    segments past the bound under `stale_tokens = mask`; 0 otherwise.
    """

    kind: ClassVar[str] = "batch_shipped"
    t: float
    seq: int = UNSEQUENCED
    step: int
    episode_ids: tuple[str, ...]
    trained_ids: tuple[str, ...]
    tokens: int
    masked_tokens: int = 0


@attrs.frozen(kw_only=True)
class RunFinished:
    """The driver closed the run; `reason` says why (for example `steps`, `zero_output`)."""

    kind: ClassVar[str] = "run_finished"
    t: float
    seq: int = UNSEQUENCED
    reason: str


@attrs.frozen(kw_only=True)
class RunResumed:
    """A driver took over a run whose previous driver died without `run_finished`.

    `episode_ids` were in flight at the crash (the dispatcher cancels them, reason
    `restart`); `version` is the checkpoint the trainer restarts from; `reason` says why.
    """

    kind: ClassVar[str] = "run_resumed"
    t: float
    seq: int = UNSEQUENCED
    reason: str
    episode_ids: tuple[str, ...]
    version: int


@attrs.frozen(kw_only=True)
class EpisodeInterrupted:
    """Inference stopped an in-flight episode, which keeps its permit and `completion_tokens`
    generated so far (all its segments): at a weight update (`update`, `weight_update =
    interrupt`) or when a batch filled (`recycle`). It goes on at `episode_resumed`."""

    kind: ClassVar[str] = "episode_interrupted"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    completion_tokens: int
    reason: InterruptReason


@attrs.frozen(kw_only=True)
class EpisodeResumed:
    """Inference resubmitted an interrupted episode with its tokens so far; its next segment
    is generated by `policy_version`, the end of its version span so far."""

    kind: ClassVar[str] = "episode_resumed"
    t: float
    seq: int = UNSEQUENCED
    episode_id: str
    policy_version: int


Event: TypeAlias = (
    RunStarted
    | GroupOpened
    | EpisodeDispatched
    | EpisodeCompleted
    | EpisodeFailed
    | EpisodesCancelled
    | VersionPending
    | VersionLive
    | LimitSet
    | OverloadCut
    | EpisodeDropped
    | GroupScored
    | BatchShipped
    | RunFinished
    | RunResumed
    | EpisodeInterrupted
    | EpisodeResumed
)

EVENT_TYPES: Final[dict[str, type[Event]]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        GroupOpened,
        EpisodeDispatched,
        EpisodeCompleted,
        EpisodeFailed,
        EpisodesCancelled,
        VersionPending,
        VersionLive,
        LimitSet,
        OverloadCut,
        EpisodeDropped,
        GroupScored,
        BatchShipped,
        RunFinished,
        RunResumed,  # kinds are appended: a kind's position is its code in the log
        EpisodeInterrupted,
        EpisodeResumed,
    )
}

# Who writes what (docs/contract.md § Events): world events come from outside the deciders (the
# driver, inference, the trainer, the concurrency controller); decided events are the
# dispatcher's and the sink's, and replay must re-derive them exactly.
WORLD_KINDS: Final = frozenset(
    {
        "run_started",
        "episode_completed",
        "episode_failed",
        "version_pending",
        "version_live",
        "limit_set",
        "overload_cut",
        "run_finished",
        "run_resumed",
        "episode_interrupted",
        "episode_resumed",
    }
)
DISPATCHER_KINDS: Final = frozenset({"group_opened", "episode_dispatched", "episodes_cancelled"})
SINK_KINDS: Final = frozenset({"episode_dropped", "group_scored", "batch_shipped"})
DECIDED_KINDS: Final = DISPATCHER_KINDS | SINK_KINDS


def with_seq(event: Event, seq: int) -> Event:
    """The same fact, placed at `seq` in a log."""
    return attrs.evolve(event, seq=seq)


def event_fields(cls: type[Event]) -> tuple[str, ...]:
    """The payload field names of an event class, without `seq` and `t`."""
    return tuple(f.name for f in attrs.fields(cls) if f.name not in ("seq", "t"))
