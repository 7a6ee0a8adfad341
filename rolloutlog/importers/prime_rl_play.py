"""Replay a prime-rl run's reconstructed world through the recorder, with prime-rl's sink rules.

`Play` walks the run in time order and decides nothing prime-rl's files decide: each group
opens at its recorded version, members arrive as recorded, a group cancelled as stale is
cancelled where the log names it, the trained episodes of batch N are those of
`train/effective`. What the files leave open is filled by prime-rl 559b447's own rules,
counted for the note: a queued episode that no batch trained was either cut and pruned (its
advantage is zero: it rides the next ship, untrained) or swept as stale (`TrainSink.
_drop_stale`: the first sweep at which (step - 1) - version > max_off_policy_steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from rolloutlog.core.scoring import grpo_advantages, is_zero_advantage
from rolloutlog.importers.prime_rl_reports import GroupDrop, LogCounts
from rolloutlog.importers.prime_rl_times import Group, Times, step_at
from rolloutlog.record import Recorder


@attrs.define
class Counts:
    """What the import did where the folder leaves a choice, for the note and stderr."""

    swept: int = 0  # queued episodes dropped as stale by the sink's sweep
    voided: int = 0  # arrived episodes dropped with their group's stale cancellation
    stale_cancelled: int = 0  # in flight and unscheduled, at version_pending
    never_arrived_groups: int = 0  # named only by the log's DEBUG lines, or the drain's count
    drained_inflight: int = 0  # in flight when the run finished
    pruned: int = 0  # cut, zero advantage, not trained
    left_queued: int = 0  # queued, neither cut nor swept before the run finished
    sweep_conflicts: int = 0  # stale by the rule, but trained: kept (times approximate)
    version_mismatches: int = 0  # groups opened at another version than their records say


@attrs.define
class Play:
    """The run's events in time order, fed to a `Recorder`."""

    groups: list[Group]
    trained: dict[int, list[str]]
    times: Times
    log: LogCounts
    bound: int
    batch_size: int
    origin: float
    unnamed_end: float | None = None  # the log names no cancellation: groups short of
    # members that ended before this time were cancelled at their last arrival (assumed)
    counts: Counts = attrs.field(factory=Counts)
    timeline: list[tuple[float, int, str, Any]] = attrs.field(factory=list)
    queue: dict[str, int] = attrs.field(factory=dict)  # queued episode -> its version
    zero: set[str] = attrs.field(factory=set)  # queued with a zero advantage
    inflight: set[str] = attrs.field(factory=set)  # dispatched, neither arrived nor cancelled
    swept_step: int = 0

    def plan(self, finish: float) -> None:
        for group in self.groups:
            self._plan_group(group)
        for step, t in self.times.ships.items():
            self.timeline.append((t, 3, "ship", step))
        for version, t in self.times.pending.items():
            if t <= finish:
                self.timeline.append((t, 4, "pending", version))
        self.timeline.sort(key=lambda item: item[:2])

    def _plan_group(self, group: Group) -> None:
        drop = self._named_drop(group)
        self.timeline.append((group.opened, 6, "open", group))
        ended, after = group.opened, 2  # its last arrival, and the order that follows it
        for arrival in group.members:
            dispatched = max(arrival.t0, group.opened)
            self.timeline.append((dispatched, 6, "dispatch", (group, arrival.episode_id)))
            order = 1 if arrival.t1 > dispatched else 7  # after its own dispatch
            at = max(arrival.t1, dispatched)
            self.timeline.append((at, order, "arrive", arrival))
            if (at, order) > (ended, after - 1):
                ended, after = at, order + 1
        unarrived = drop.inflight if drop is not None else group.inflight_unarrived
        last = max((a.t0 for a in group.members), default=group.opened)
        for n in range(unarrived):
            self.timeline.append(
                (max(last, group.opened), 6, "dispatch", (group, f"{group.id}/never-{n}"))
            )
        if drop is not None and drop.reason != "stale":  # an overload cut: when, unknown
            self.timeline.append((ended, after, "stale", (group, drop)))
        elif drop is not None and drop.version in self.times.pending:
            at = max(self.times.pending[drop.version], ended)
            self.timeline.append((at, 5 if at > ended else after, "stale", (group, drop)))
        elif len(group.members) == group.size:
            self.timeline.append((ended, after, "finalize", group))
        elif self.unnamed_end is not None and ended < self.unnamed_end:
            self.timeline.append((ended, after, "unnamed", group))

    def _named_drop(self, group: Group) -> GroupDrop | None:
        return next((d for d in self.log.group_drops if group.id.startswith(d.prefix)), None)

    def run(self, rec: Recorder, finish: float) -> None:
        handlers: dict[str, Callable[[Recorder, float, Any], None]] = {
            "open": self._open,
            "dispatch": self._dispatch,
            "arrive": self._arrive,
            "finalize": self._finalize,
            "stale": self._stale,
            "unnamed": self._unnamed,
            "ship": self._ship,
            "pending": self._pending,
        }
        for t, _, kind, what in self.timeline:
            if t > finish:
                break
            handlers[kind](rec, t - self.origin, what)
        self.counts.left_queued = len(self.queue)
        self.counts.drained_inflight = len(self.inflight)
        rec.finish(finish - self.origin, reason="steps")

    def _open(self, rec: Recorder, now: float, group: Group) -> None:
        if group.version is not None and group.work == "train" and rec.version != group.version:
            self.counts.version_mismatches += 1
        described = {"env": group.env, "task": group.task, "work": group.work}
        rec.open_group(now, group.id, size=group.size, frozen=group.frozen, **described)

    def _dispatch(self, rec: Recorder, now: float, what: tuple[Group, str]) -> None:
        rec.dispatch(now, what[0].id, what[1])
        self.inflight.add(what[1])

    def _arrive(self, rec: Recorder, now: float, arrival: Any) -> None:
        self.inflight.discard(arrival.episode_id)
        if arrival.reward is None:
            rec.fail(now, arrival.episode_id, error=arrival.error)
            return
        rec.complete(
            now,
            arrival.episode_id,
            reward=arrival.reward,
            prompt_tokens=arrival.prompt_tokens,
            completion_tokens=arrival.completion_tokens,
        )

    def _pending(self, rec: Recorder, now: float, version: int) -> None:
        rec.version_pending(now, version)
        rec.version_live(now, version)

    def _unnamed(self, rec: Recorder, now: float, group: Group) -> None:
        """A group short of members that no log line names: they were cancelled as
        unscheduled at its last arrival, as stale where prime-rl's rule finds it stale."""
        stale = group.version is not None and (rec.step - 1) - group.version > self.bound
        owed = group.size - len(group.members)
        drop = GroupDrop(group.id[:8], group.env, "stale" if stale else "overload", 0, owed, None)
        self._stale(rec, now, (group, drop))

    def _stale(self, rec: Recorder, now: float, what: tuple[Group, GroupDrop]) -> None:
        """A named cancellation: a stale one voids the group's arrivals with it (prime-rl's
        per-group rule); another (overload) leaves them to be scored."""
        group, drop = what
        never = [f"{group.id}/never-{n}" for n in range(drop.inflight)]
        self.inflight.difference_update(never)
        rec.cancel(now, group.id, never, unscheduled=drop.unscheduled, reason=drop.reason)
        if drop.reason != "stale":  # an overload cancellation voids nothing arrived
            self._finalize(rec, now, group)
            return
        self.counts.stale_cancelled += drop.inflight + drop.unscheduled
        arrived = [a.episode_id for a in group.members if a.reward is not None]
        for episode in arrived:  # prime-rl voids the group's arrivals with it
            rec.drop(now, episode)
        self.counts.voided += len(arrived)
        rec.score(now, group.id, {}, admitted=False)

    def _finalize(self, rec: Recorder, now: float, group: Group) -> None:
        scored = [a for a in group.members if a.reward is not None]
        rewards = [a.reward for a in scored if a.reward is not None]
        advantages = dict(
            zip((a.episode_id for a in scored), grpo_advantages(rewards), strict=True)
        )
        train = group.work == "train"
        rec.score(now, group.id, advantages, admitted=train and bool(scored))
        if not (train and scored):
            return
        for episode, advantage in advantages.items():
            self.queue[episode] = group.version or 0
            if is_zero_advantage(advantage):
                self.zero.add(episode)
        self._sweep(rec, now, list(advantages))  # the insertion sweep
        self._sweep(rec, now, None)  # the full sweep, once per step

    def _sweep(self, rec: Recorder, now: float, scoped: list[str] | None) -> None:
        step = rec.step  # the batch being collected: prime-rl's progress.step
        if scoped is None:
            if self.swept_step == step:
                return
            self.swept_step = step
        trained = {e for ids in self.trained.values() for e in ids}
        for episode in list(self.queue if scoped is None else scoped):
            version = self.queue.get(episode)
            if version is None or (step - 1) - version <= self.bound:
                continue
            if episode in trained:
                self.counts.sweep_conflicts += 1
                continue
            del self.queue[episode]
            rec.drop(now, episode)
            self.counts.swept += 1

    def _ship(self, rec: Recorder, now: float, step: int) -> None:
        trained = [e for e in self.trained.get(step, []) if e in self.queue]
        empty = self.log.empty_batches.get(step, 0)
        room = empty * self.batch_size + max(0, self.batch_size - len(trained))
        pruned = [e for e in self.queue if e in self.zero and e not in trained][:room]
        cut = trained + pruned
        for episode in cut:
            del self.queue[episode]
        self.counts.pruned += len(pruned)
        rec.ship(now, cut, trained=trained)


def never_arrived(
    log: LogCounts, groups: list[Group], size: int, times: Times, bound: int, origin: float
) -> list[Group]:
    """Groups only the log's DEBUG drop lines name: opened at the newest version that the
    drop's pending found stale, when that version went pending; their in-flight members
    dispatched then."""
    known = {g.id[:8] for g in groups}
    found = []
    for drop in log.group_drops:
        if drop.prefix in known or drop.version not in times.pending:
            continue
        at = times.pending[drop.version]
        version = max(0, step_at(times, at) - 1 - bound - 1)  # below (step-1) - bound: stale
        opened = min(times.pending.get(version, origin), at)
        name = f"{drop.prefix}-never-arrived"
        found.append(Group(name, [], version, size, drop.env, "unknown", opened=opened))
    return found


def drained(
    log: LogCounts, groups: list[Group], size: int, finish: float, unnamed_end: float | None
) -> list[Group]:
    """prime-rl's drain cancelled the log's count of runs in flight, unnamed: the missing members
    of groups still open are taken as in flight first (in opening order), the rest as
    groups that never arrived, dispatched at the final ship."""
    left = log.drained or 0
    for group in sorted(groups, key=lambda g: g.opened):
        owed = group.size - len(group.members)
        if owed <= 0 or any(group.id.startswith(d.prefix) for d in log.group_drops):
            continue
        if unnamed_end is not None and group.last_arrival < unnamed_end:
            continue  # cancelled at its last arrival (`Play._unnamed`)
        group.inflight_unarrived = min(owed, left)
        left -= group.inflight_unarrived
    extra = []
    for n in range(ceil_div(left, size)):
        group = Group(f"drained-never-arrived-{n}", [], None, size, "unknown", "unknown")
        group.opened, group.inflight_unarrived = finish, min(size, left - n * size)
        extra.append(group)
    return extra


def peak_inflight(timeline: list[tuple[float, int, str, Any]]) -> int:
    held = peak = 0
    for _, _, kind, _ in timeline:
        held += {"dispatch": 1, "arrive": -1}.get(kind, 0)
        peak = max(peak, held)
    return max(peak, 1)


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b) if b else 0
