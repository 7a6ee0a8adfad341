"""The properties of docs/contract.md, checked on every event by shadow bookkeeping.

The checker keeps its own, independent account of every group and episode (it does not
trust the deciders' state) and reports each broken property with the seq where it broke:
bound, conservation, permits, late events, scoring. Memory is bounded by open groups and
queued episodes, plus one small integer per group ever opened (how many members it
dispatched), which is what lets it tell a late event from one for an episode that never
existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.core.staleness import is_stale, rollout_age
from rolloutlog.events.types import Event


class HoldsDispatcher(Protocol):
    """Anything that folds the dispatcher: the reaction loop, or replay's log fold."""

    @property
    def dispatcher_state(self) -> Any: ...


class InvariantViolation(AssertionError):
    """A property of docs/contract.md does not hold at the named seq."""


@attrs.define(slots=True)
class _Episode:
    version: int
    state: str = "inflight"  # inflight | completed | failed | cancelled | dropped
    reward: float | None = None


@attrs.define(slots=True)
class _Group:
    size: int
    train: bool
    live: bool
    episodes: dict[str, _Episode] = attrs.Factory(dict)
    cancelled: int = 0
    undispatched: int = 0


@attrs.define(slots=True)
class _Queued:
    version: int
    live: bool


class InvariantChecker:
    """An observer of the reaction loop (or of a replayed log) that checks every event.

    With `raise_on_violation`, the first broken property raises `InvariantViolation`;
    otherwise violations are collected in `violations` as "seq N (kind): what broke".
    """

    def __init__(self, config: RunConfig, *, raise_on_violation: bool = True) -> None:
        self.config = config
        self.raise_on_violation = raise_on_violation
        self.violations: list[str] = []
        self.step, self.limit = 1, config.max_inflight
        self.inflight = 0
        self.groups: dict[str, _Group] = {}
        self.dispatched_members: list[int] = [0]  # by group number; group 0 does not exist
        self.queued: dict[str, _Queued] = {}
        self.shipped_steps = 0
        self.finished = False
        self.late_events = 0
        self.publish_step = 1
        self.version = 0
        self.train_promised = 0  # trained + queued + arrived-unfinalized + in-flight (train)
        self.train_inflight = 0
        self.restart_ids: frozenset[str] = frozenset()  # outstanding at the latest restart
        self.resumed_from: int | None = None  # the checkpoint of the latest restart

    # --- reporting -----------------------------------------------------------------------

    def _fail(self, event: Event, problem: str) -> None:
        message = f"seq {event.seq} ({event.kind}): {problem}"
        if self.raise_on_violation:
            raise InvariantViolation(message)
        self.violations.append(message)

    def _check(self, ok: bool, event: Event, problem: str) -> None:
        if not ok:
            self._fail(event, problem)

    # --- observer protocol -----------------------------------------------------------------

    def before(self, event: Event, loop: HoldsDispatcher | None = None) -> None:
        """Nothing to do before an event: the checker keeps its own account."""

    def observe(self, event: Event, loop: HoldsDispatcher | None = None) -> None:
        """Check one appended event; with a loop, also compare permits with its dispatcher."""
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event)
        if loop is not None:
            held = len(loop.dispatcher_state.inflight)
            self._check(
                held == self.inflight,
                event,
                f"dispatcher holds {held} permits, {self.inflight} episodes are in flight",
            )

    def settled(self, world_event: Event, loop: HoldsDispatcher | None = None) -> None:
        """After a world event settled: no train episode that was stale when a version update
        arrived may still be in flight (per-episode; per-group dispatches a group's late
        members at its start version, stale or not), and at quiescence nothing may be open.

        Staleness is judged at the step the update arrived at: batches shipped later in the
        same reaction can age episodes further, and those the sink drops when they arrive.
        """
        if world_event.kind == "version_pending" and self.config.staleness == "per-episode":
            for group_id, group in self.groups.items():
                for episode_id, episode in group.episodes.items():
                    stale = self._stale(group, episode.version, self.publish_step)
                    if episode.state == "inflight" and stale:
                        self._fail(world_event, f"stale {episode_id} of {group_id} still in flight")
        if world_event.kind == "run_finished":
            self.check_quiescent(world_event)
        if world_event.kind == "run_resumed":
            self._check_restart_resolved(world_event)

    def check_quiescent(self, event: Event) -> None:
        """Conservation at the end of a run: no group left open, nothing in flight."""
        self._check(
            not self.groups, event, f"groups left open at quiescence: {sorted(self.groups)[:5]}"
        )
        self._check(self.inflight == 0, event, f"{self.inflight} episodes in flight at quiescence")

    # --- per kind ------------------------------------------------------------------------

    def _stale(self, group: _Group, version: int, step: int | None = None) -> bool:
        bound, step = self.config.max_off_policy_steps, step or self.step
        return is_stale(version, step, bound, train=group.train, live=group.live)

    def _group_opened(self, event: Any) -> None:
        self._check(not self.finished, event, "group opened after run_finished")
        number = len(self.dispatched_members)
        self._check(event.group_id == f"g{number}", event, f"expected g{number}")
        self.dispatched_members.append(0)
        self.groups[event.group_id] = _Group(
            event.group_size, event.work == "train", event.live, undispatched=event.group_size
        )

    def _dispatched(self, event: Any) -> None:
        group = self.groups.get(event.group_id)
        if group is None:
            return self._fail(event, f"dispatch into {event.group_id}, which is not open")
        self._check(not self.finished, event, "dispatch after run_finished")
        self._check(self.inflight < self.limit, event, f"admitted above the limit {self.limit}")
        self._check(group.undispatched > 0, event, f"{event.group_id} has no member left")
        self._check(event.episode_id not in group.episodes, event, "episode dispatched twice")
        if group.train:
            self._check_capacity(event)
            self.train_promised += 1
            self.train_inflight += 1
        group.undispatched -= 1
        group.episodes[event.episode_id] = _Episode(event.policy_version)
        self.dispatched_members[int(event.group_id[1:])] += 1
        self.inflight += 1

    def _check_capacity(self, event: Any) -> None:
        """Capacity admission: no train dispatch once the promised work fills the horizon,
        unless no train episode is in flight (the liveness exception, see core.ledger)."""
        config = self.config
        if config.admission != "capacity" or config.batch_size is None:
            return
        capacity = (config.max_off_policy_steps + self.version + 1) * config.batch_size
        self._check(
            self.train_promised < capacity or self.train_inflight == 0,
            event,
            f"capacity admission: {self.train_promised} train episodes promised of {capacity}",
        )

    def _arrived(self, event: Any) -> None:
        group_id, _, member = event.episode_id.rpartition("/")
        group = self.groups.get(group_id)
        episode = group.episodes.get(event.episode_id) if group else None
        if episode is None:
            if not self._was_dispatched(group_id, member):
                return self._fail(event, f"{event.episode_id} was never dispatched")
            self.late_events += 1  # its group finalized: the episode was cancelled before
            return None
        if episode.state != "inflight":
            self.late_events += 1  # cancelled before, or a second arrival: recorded, ignored
            return None
        completed = event.kind == "episode_completed"
        episode.state = "completed" if completed else "failed"
        episode.reward = event.reward if completed else None
        self.inflight -= 1
        self.train_inflight -= group.train if group else 0
        return None

    def _was_dispatched(self, group_id: str, member: str) -> bool:
        number = int(group_id[1:]) if group_id[1:].isdigit() else 0
        return 0 < number < len(self.dispatched_members) and (
            member.isdigit() and int(member) < self.dispatched_members[number]
        )

    def _cancelled(self, event: Any) -> None:
        group = self.groups.get(event.group_id)
        if group is None:
            return self._fail(event, f"cancellation for {event.group_id}, which is not open")
        if event.reason == "straggler":
            self._check_straggler(group, event)
        if event.reason == "restart":
            strays = [e for e in event.episode_ids if e not in self.restart_ids]
            self._check(
                not strays and not event.unscheduled,
                event,
                f"a restart cancels only what was outstanding: {strays[:3]}, "
                f"{event.unscheduled} unscheduled",
            )
        self.train_promised -= len(event.episode_ids) if group.train else 0
        for episode_id in event.episode_ids:
            episode = group.episodes.get(episode_id)
            if episode is None or episode.state != "inflight":
                self._fail(event, f"{episode_id} cancelled but not in flight")
                continue
            if event.reason == "stale":
                self._check(
                    self._stale(group, episode.version), event, f"{episode_id} is not stale"
                )
            episode.state = "cancelled"
            self.inflight -= 1
            self.train_inflight -= group.train
        self._check(event.unscheduled <= group.undispatched, event, "cancels unowed members")
        group.undispatched -= event.unscheduled
        group.cancelled += len(event.episode_ids) + event.unscheduled
        return None

    def _check_straggler(self, group: _Group, event: Any) -> None:
        """A straggler cut needs an arrived fresh member at risk, and cancels all it owes."""
        bound = self.config.max_off_policy_steps
        at_risk = (
            group.train
            and group.live
            and any(
                e.state == "completed" and rollout_age(e.version, self.step) == bound
                for e in group.episodes.values()
            )
        )
        self._check(at_risk, event, f"straggler cut of {event.group_id}: no arrival at risk")
        left = [
            episode_id
            for episode_id, e in group.episodes.items()
            if e.state == "inflight" and episode_id not in event.episode_ids
        ]
        self._check(
            not left and event.unscheduled == group.undispatched,
            event,
            f"straggler cut of {event.group_id} leaves members owed: {left}",
        )

    def _dropped(self, event: Any) -> None:
        self.train_promised -= 1
        queued = self.queued.pop(event.episode_id, None)
        if queued is not None:
            version, stale = queued.version, queued.live
        else:
            group = self.groups.get(event.episode_id.rpartition("/")[0])
            episode = group.episodes.get(event.episode_id) if group else None
            if group is None or episode is None or episode.state not in ("completed", "failed"):
                return self._fail(
                    event, f"{event.episode_id} dropped but neither queued nor arrived"
                )
            episode.state = "dropped"
            version, stale = episode.version, group.train and group.live
        age = rollout_age(version, self.step)
        self._check(event.age == age, event, f"recorded age {event.age}, actual age {age}")
        self._check(stale and age > self.config.max_off_policy_steps, event, "not stale")
        return None

    def _scored(self, event: Any) -> None:
        group = self.groups.pop(event.group_id, None)
        if group is None:
            return self._fail(event, f"{event.group_id} finalized twice or never opened")
        arrived = sum(
            e.state in ("completed", "failed", "dropped") for e in group.episodes.values()
        )
        self._check(
            arrived + group.cancelled == group.size,
            event,
            f"finalized with {arrived} arrived + {group.cancelled} cancelled != G={group.size}",
        )
        fresh = [
            (int(i.rpartition("/")[2]), i, e.reward)
            for i, e in group.episodes.items()
            if e.state == "completed"
        ]
        fresh.sort()
        fresh_ids = [i for _, i, _ in fresh]
        self._check(
            list(event.episode_ids) == fresh_ids,
            event,
            f"scored {list(event.episode_ids)}, fresh successful members {fresh_ids}",
        )
        if not group.train:
            self._check(not event.advantages and not event.admitted, event, "eval group trained")
            return None
        expected = grpo_advantages([r for _, _, r in fresh if r is not None])
        self._check(
            all(abs(a - b) <= 1e-9 for a, b in zip(event.advantages, expected, strict=False))
            and len(event.advantages) == len(expected),
            event,
            f"advantages {event.advantages} != GRPO over the scored rewards {expected}",
        )
        if event.admitted:
            for episode_id in event.episode_ids:
                self.queued[episode_id] = _Queued(group.episodes[episode_id].version, group.live)
        arrived_kept = sum(e.state in ("completed", "failed") for e in group.episodes.values())
        self.train_promised -= arrived_kept - (len(event.episode_ids) if event.admitted else 0)
        return None

    def _batch(self, event: Any) -> None:
        self._check(not self.finished, event, "batch shipped after run_finished")
        self._check(event.step == self.step, event, f"batch for step {event.step} at {self.step}")
        self._check(set(event.trained_ids) <= set(event.episode_ids), event, "trains uncut ids")
        for episode_id in event.episode_ids:
            queued = self.queued.pop(episode_id, None)
            if queued is None:
                self._fail(event, f"{episode_id} shipped but not queued (or shipped twice)")
                continue
            age = rollout_age(queued.version, event.step)
            self._check(
                not queued.live or age <= self.config.max_off_policy_steps,
                event,
                f"{episode_id} shipped at age {age} > {self.config.max_off_policy_steps}",
            )
        self.step = event.step + 1

    def _version_pending(self, event: Any) -> None:
        if self.resumed_from is not None:  # across a restart, each batch trains once
            shipped = self.step - 1
            self._check(
                self.version < event.version <= shipped,
                event,
                f"v{event.version} after v{self.version} with {shipped} batches shipped: "
                "a version is announced once, after its batch",
            )
            self._check(
                event.version >= self.resumed_from,
                event,
                f"v{event.version} is inside checkpoint v{self.resumed_from} that the run "
                "resumed from: its batch would train twice",
            )
        self.publish_step = self.step
        self.version = event.version

    def _resumed(self, event: Any) -> None:
        """A restart names exactly what was outstanding, after the last announced version
        and no further than the batches shipped (nothing trained twice, nothing lost)."""
        self._check(not self.finished, event, "a restart after run_finished")
        outstanding = {
            episode_id
            for group in self.groups.values()
            for episode_id, episode in group.episodes.items()
            if episode.state == "inflight"
        }
        named = set(event.episode_ids)
        self._check(
            named == outstanding,
            event,
            f"names {len(named)} outstanding episodes, {len(outstanding)} were in flight: "
            f"{sorted(named ^ outstanding)[:3]}",
        )
        shipped = self.step - 1
        self._check(
            self.version <= event.version <= shipped,
            event,
            f"resumes from v{event.version}, but v{self.version} was announced and "
            f"{shipped} batches shipped",
        )
        self.restart_ids = frozenset(named)
        self.resumed_from = event.version

    def _check_restart_resolved(self, event: Event) -> None:
        """Once the restart settled, every episode outstanding at the crash is cancelled."""
        left = [
            episode_id
            for episode_id in sorted(self.restart_ids)
            if (group := self.groups.get(episode_id.rpartition("/")[0])) is not None
            and group.episodes[episode_id].state == "inflight"
        ]
        self._check(not left, event, f"outstanding at the restart, still in flight: {left[:3]}")
        self.restart_ids = frozenset()

    def _limit(self, event: Any) -> None:
        self.limit = event.max_inflight

    def _finished(self, event: Any) -> None:
        self.finished = True


_HANDLERS: dict[str, Callable[[InvariantChecker, Any], None]] = {
    "group_opened": InvariantChecker._group_opened,
    "episode_dispatched": InvariantChecker._dispatched,
    "episode_completed": InvariantChecker._arrived,
    "episode_failed": InvariantChecker._arrived,
    "episodes_cancelled": InvariantChecker._cancelled,
    "episode_dropped": InvariantChecker._dropped,
    "group_scored": InvariantChecker._scored,
    "batch_shipped": InvariantChecker._batch,
    "version_pending": InvariantChecker._version_pending,
    "limit_set": InvariantChecker._limit,
    "run_finished": InvariantChecker._finished,
    "run_resumed": InvariantChecker._resumed,
}
