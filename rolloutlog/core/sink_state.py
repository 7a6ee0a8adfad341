"""The sink's state: open groups, arrivals, the queue, the step and version, idle work."""

from __future__ import annotations

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.curriculum import Curriculum, curriculum_named
from rolloutlog.core.presets import Rules, rules_for
from rolloutlog.core.sink_mask import Pieces, Segment
from rolloutlog.core.staleness import is_stale


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
    rules: Rules  # what the run's policy chose from the rule families (`core.presets`)
    admit: Curriculum
    step: int = 1
    version: int = 0
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


def initial_state(config: RunConfig) -> SinkState:
    """The sink before `run_started`: step 1, version 0, nothing queued."""
    return SinkState(
        config=config, rules=rules_for(config), admit=curriculum_named(config.curriculum)
    )
