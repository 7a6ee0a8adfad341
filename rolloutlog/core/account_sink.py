"""The shadow account's checks of the sink's events: drops, scoring and batches (a mixin
of `core.account.Account`).

Each checks the event against the account's own books (its queue, open groups, step and
version) with its own arithmetic (`core.account_group`): a drop's recorded age and
staleness, a scoring's fresh members and GRPO advantages, a batch's step, hold, bound and
tokens. What each rule family adds is its mixin's hook (`_mask_*`, `_withhold_*`,
`_requeue_*`, `_leftover_*`, `_wait_*`, eviction's `_evicted` and `_make_room`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from rolloutlog.core.account_group import Group, advantages, age, past_bound
from rolloutlog.core.account_properties import HARD_BOUND, OUTSTANDING, VERL_BUDGET
from rolloutlog.core.run_summary import RunSummary
from rolloutlog.events.types import DROP_REASONS

# How far recorded advantages may sit from GRPO over the scored rewards.
ADVANTAGE_TOLERANCE: Final = 1e-9


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    step: int
    version: int
    bound: int
    kept: frozenset[str]
    finished: bool
    gated: bool
    capacity: bool
    withholds: bool
    train_promised: int
    groups: dict[str, Group]
    queue: dict[str, tuple[int, bool, int]]
    queued_at: dict[str, int]
    to_withhold: dict[str, int]
    unpublished: dict[int, set[str]]
    update_pause: bool

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def _paused_by_update(self, seq: int, kind: str, dispatch: bool) -> None: ...

    def _moved(self) -> None: ...

    def members(self, group: Group) -> int: ...

    def _evicted(self, seq: int, episode_id: str, recorded_age: int) -> None: ...

    def _make_room(self, seq: int, incoming: int) -> None: ...

    def _mask_dropped(self, seq: int, episode_id: str, reason: str, ages: bool) -> None: ...

    def _mask_shipped(
        self,
        seq: int,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        cut: Mapping[str, tuple[int, int, bool]],
        masked_tokens: int,
        tokens: int,
    ) -> None: ...

    def _leftover_dropped(self, seq: int, episode_id: str, group: Group | None) -> None: ...

    def _scored_room(self, group: Group, scored: int, admitted: bool) -> None: ...

    def _leftover_scored(
        self, seq: int, group_id: str, scored: Sequence[str], admitted: bool
    ) -> None: ...

    def _requeue_dropped(
        self, seq: int, episode_id: str, group: Group | None, queued: bool
    ) -> None: ...

    def _requeue_whole(self, seq: int, group_id: str, group: Group) -> None: ...

    def _withhold_owed(self, seq: int, kind: str) -> None: ...

    def _withhold_dropped(
        self, seq: int, episode_id: str, reason: str, group: Group | None
    ) -> None: ...

    def _withhold_scored(
        self, group: Group, episode_ids: Sequence[str], admitted: bool
    ) -> None: ...

    def _wait_watch(self) -> None: ...

    def _wait_shipped(self, seq: int, step: int) -> None: ...


class SinkChecks:
    """`Account`'s checks of `episode_dropped`, `group_scored` and `batch_shipped`."""

    def on_dropped(self: _Books, seq: int, episode_id: str, reason: str, recorded_age: int) -> None:
        kind = "episode_dropped"
        self.queued_at.pop(episode_id, None)
        if reason == "evicted":  # a bounded queue's, of any age (`core.account_eviction`)
            return self._evicted(seq, episode_id, recorded_age)
        self.train_promised -= 1
        queued = self.queue.pop(episode_id, None)
        group = None
        if queued is not None:
            version, ages, _ = queued
        else:
            group = self.groups.get(episode_id.rpartition("/")[0])
            arrival = group.arrived.get(episode_id) if group is not None else None
            if group is None or arrival is None or episode_id in group.dropped:
                return self._fail(seq, kind, f"{episode_id} dropped but neither queued nor arrived")
            group.dropped.add(episode_id)
            version, ages = arrival[1], group.train and not group.frozen
        actual = age(version, self.step)
        self._mask_dropped(seq, episode_id, reason, ages)
        if reason not in DROP_REASONS or recorded_age != actual:
            self._fail(seq, kind, f"recorded age {recorded_age}, actual age {actual}")
        if reason == "leftover":
            return self._leftover_dropped(seq, episode_id, group)
        self.run.dropped_stale += 1
        if reason == "requeue":
            self._requeue_dropped(seq, episode_id, group, queued is not None)
        if self.withholds or self.to_withhold or reason == "withheld":  # else it checks nothing
            self._withhold_dropped(seq, episode_id, reason, group)
        if not past_bound(ages, version, self.step, self.bound):
            self._fail(seq, kind, f"{episode_id} is not stale")
        return None

    def on_scored(
        self: _Books,
        seq: int,
        group_id: str,
        episode_ids: Sequence[str],
        scored_advantages: Sequence[float],
        admitted: bool,
    ) -> None:
        kind = "group_scored"
        self._withhold_owed(seq, kind)
        group = self.groups.pop(group_id, None)
        if group is None:
            return self._fail(seq, kind, f"{group_id} finalized twice or never opened")
        self._make_room(seq, len(episode_ids) if admitted and group.train else 0)
        if group.owes or len(group.arrived) + group.cancelled != self.members(group):
            arrived = len(group.arrived)
            problem = f"finalized with {arrived} arrived + {group.cancelled} cancelled"
            return self._fail(seq, kind, f"{problem} != G+r={self.members(group)}")
        self._requeue_whole(seq, group_id, group)
        self._scored_room(group, len(episode_ids), admitted)
        self._leftover_scored(seq, group_id, episode_ids, admitted)
        fresh = sorted(
            (member, episode_id, reward)
            for episode_id, (member, _, reward, _) in group.arrived.items()
            if reward is not None and episode_id not in group.dropped
        )
        fresh_ids = [episode_id for _, episode_id, _ in fresh]
        if list(episode_ids) != fresh_ids:
            return self._fail(seq, kind, f"scored {list(episode_ids)}, fresh are {fresh_ids}")
        if not group.train:
            if scored_advantages or admitted:
                self._fail(seq, kind, "eval group trained")
            return None
        self.run.scored += len(episode_ids)
        self.run.partial += len(episode_ids) < group.size
        self.run.admitted_groups += admitted
        if admitted and not episode_ids:
            self._fail(seq, kind, "admits a group with no scored member")
        expected = advantages([reward for _, _, reward in fresh if reward is not None])
        if len(scored_advantages) != len(expected) or not all(
            abs(a - b) <= ADVANTAGE_TOLERANCE
            for a, b in zip(scored_advantages, expected, strict=True)
        ):  # a NaN fails this comparison too
            self._fail(seq, kind, f"advantages {list(scored_advantages)} != GRPO {expected}")
        if self.capacity:
            kept = sum(episode_id not in group.dropped for episode_id in group.arrived)
            self.train_promised -= kept - (len(episode_ids) if admitted else 0)
        if admitted:
            for episode_id in episode_ids:
                _, version, _, tokens = group.arrived[episode_id]
                self.queue[episode_id] = (version, not group.frozen, tokens)
        self._wait_watch()
        self._withhold_scored(group, episode_ids, admitted)
        return None

    def on_shipped(
        self: _Books,
        seq: int,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        tokens: int,
        masked_tokens: int = 0,
    ) -> None:
        kind = "batch_shipped"
        self._withhold_owed(seq, kind)
        self.run.trained += len(trained_ids)
        self.run.pruned += len(episode_ids) - len(trained_ids)
        if step != self.step:
            return self._fail(seq, kind, f"batch for step {step} at step {self.step}")
        if self.finished:
            self._fail(seq, kind, "batch shipped after run_finished")
        if self.gated:  # at this batch's step: the ship hold has not lifted
            self._fail(seq, kind, f"shipped at v{self.version}, before the ship hold lifts")
        if self.update_pause:
            self._paused_by_update(seq, kind, dispatch=False)
        self._wait_shipped(seq, step)
        if OUTSTANDING in self.kept or VERL_BUDGET in self.kept:
            self.unpublished = {s: g for s, g in self.unpublished.items() if s > self.version}
            self.unpublished[step] = set(episode_ids)
        cut: dict[str, tuple[int, int, bool]] = {}  # id -> (version, tokens, ages)
        for episode_id in episode_ids:
            queued = self.queue.pop(episode_id, None)
            self.queued_at.pop(episode_id, None)
            if queued is None:
                self._fail(seq, kind, f"{episode_id} shipped but not queued (or twice)")
                continue
            version, ages, episode_tokens = queued
            if past_bound(ages, version, step, self.bound) and HARD_BOUND in self.kept:
                self._fail(seq, kind, f"{episode_id} shipped at age {age(version, step)}")
            cut[episode_id] = (version, episode_tokens, ages)
        if len(set(trained_ids)) != len(trained_ids) or not cut.keys() >= set(trained_ids):
            self._fail(seq, kind, "trains an episode it did not cut, or one twice")
        held = 0
        for episode_id in trained_ids:
            if episode_id in cut:
                version, episode_tokens, ages = cut[episode_id]
                stale = past_bound(ages, version, step, self.bound)
                self.run.trained_at(age(version, step), past_bound=stale)
                held += episode_tokens
        if tokens != held:
            self._fail(seq, kind, f"tokens {tokens}, but the trained episodes hold {held}")
        self._mask_shipped(seq, step, episode_ids, trained_ids, cut, masked_tokens, tokens)
        self.step = step + 1
        self._moved()
        return None
