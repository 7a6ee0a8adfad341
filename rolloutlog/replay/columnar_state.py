"""The fused state of the columnar fold: both deciders, the checker and the summary in one.

The plain fold keeps three accounts of the same log (the dispatcher's, the sink's and the
invariant checker's shadow) and builds an event object per row. On a consistent log the
three agree, so the columnar fold keeps one account and applies each row straight from
its column values. It must end where the plain fold ends: the same digest chain (the
state summary each digest covers is derived from this account), the same run summary
(kept in a `SummaryCollector`, so the output format has one definition), and the same
verdict. It does not report problems itself: any row the plain fold would refuse, or
flag as a violation, raises `NeedsPlainFold`, and the log is folded again on the plain
path, which words the error exactly. Refusing more than the plain fold would is allowed
(only slower); refusing less is a bug, which the equivalence suite hunts for.
"""

from __future__ import annotations

from typing import Final

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.events.types import DROP_REASONS
from rolloutlog.replay.registry import DispatchRegistry
from rolloutlog.replay.summary import SummaryCollector

# How far recorded advantages may sit from GRPO over the scored rewards (the checker's own).
ADVANTAGE_TOLERANCE = 1e-9
# The config fields whose effect on folding and checking this account models. Any other
# field must keep its default: a new rule in the deciders or the checker (capacity
# admission, straggler cuts) sends its logs to the plain fold until it is modelled here.
MODELLED_CONFIG: Final = frozenset(
    {
        "max_inflight",
        "max_off_policy_steps",
        "group_size",
        "batch_size",
        "token_batch_size",
        "target_lag",
        "staleness",
        "filter_zero_advantages",
        "seed",
        "tasks",
        "eval_interval",
        "frozen_fraction",
        "admission_smoothing",
        "curriculum",
        "zero_output_batches",
        "batch_order",
        "admission",
        "straggler_cut",
    }
)
# Cancellation reasons this account checks as the checker does; others go to the plain fold.
MODELLED_REASONS: Final = frozenset({"stale", "overload", "shutdown", "straggler"})


class NeedsPlainFold(Exception):  # a signal to the driver, not a failure
    """The columnar fold met a row it does not vouch for; fold the log on the plain path."""

    def __init__(self, seq: int, why: str) -> None:
        super().__init__(f"seq {seq}: {why}")
        self.seq = seq
        self.why = why


@attrs.define(slots=True)
class FusedGroup:
    """One group as the dispatcher, the sink and the checker all see it."""

    number: int
    size: int
    train: bool
    live: bool
    dispatched: int = 0
    unscheduled: int = 0
    inflight: dict[str, tuple[int, int]] = attrs.Factory(dict)  # id -> (version, member)
    arrived: dict[str, tuple[int, int, float | None]] = attrs.Factory(dict)  # id -> (m, v, r)
    dropped: set[str] = attrs.Factory(set)
    cancelled: int = 0
    dispatcher_open: bool = True

    def stale(self, version: int, step: int, bound: int) -> bool:
        """`core.staleness.is_stale` for a member of this group, inlined for the hot path."""
        return self.train and self.live and (step - 1) - version > bound


def unmodelled_config(config: RunConfig) -> str | None:
    """The first config field set away from its default that this account does not model."""
    for field in attrs.fields(RunConfig):
        if field.name not in MODELLED_CONFIG and getattr(config, field.name) != field.default:
            return field.name
    return None


class FusedState:
    """The account the columnar fold keeps; each `on_*` applies one row or raises."""

    def __init__(self, config: RunConfig) -> None:
        unmodelled = unmodelled_config(config)
        if unmodelled is not None:
            raise NeedsPlainFold(0, f"config {unmodelled} is not modelled by the columnar fold")
        self.config = config
        self.bound = config.max_off_policy_steps
        self.per_episode = config.staleness == "per-episode"
        self.step, self.version, self.limit = 1, 0, config.max_inflight
        self.publish_step = 1  # the step when the last version update arrived
        self.summary_head, self.summary_middle = "", ""
        self._summary_texts()
        self.groups: dict[str, FusedGroup] = {}  # open at the sink (until group_scored)
        self.dispatcher_groups = 0  # groups that still owe the dispatcher a member
        self.inflight: dict[str, FusedGroup] = {}
        self.queue: dict[str, tuple[int, bool]] = {}  # id -> (version, live), oldest first
        self.registry = DispatchRegistry()
        self.finished = False
        self.collector = SummaryCollector(config.group_size)
        # Capacity admission, as the checker counts it: train episodes promised (in flight,
        # arrived and not yet finalized, queued, trained) against (bound + version + 1) batches.
        self.capacity = config.admission == "capacity" and config.batch_size is not None
        self.train_promised = 0
        self.train_inflight = 0

    def summary(self) -> tuple[int, ...]:
        """`ReactionLoop.summary` of the plain deciders, from the fused account."""
        inflight, step, version = len(self.inflight), self.step, self.version
        dispatcher = (step, version, self.limit, inflight, self.dispatcher_groups)
        return (*dispatcher, step, version, len(self.queue), len(self.groups), inflight)

    def _summary_texts(self) -> None:
        """The parts of `repr(self.summary())` that change only with step, version, limit.

        The hot loop writes the summary's text from these and the four counts that change
        on almost every row, instead of building and printing a tuple per row.
        """
        self.summary_head = f"({self.step}, {self.version}, {self.limit}, "
        self.summary_middle = f", {self.step}, {self.version}, "

    # --- settling (the checker's checks after a world event's reactions) -----------------

    def settle(self, seq: int, world_kind: str) -> None:
        """The checks `InvariantChecker.settled` makes once a world event has settled."""
        if world_kind == "version_pending" and self.per_episode:
            # Judged at the step the update arrived at, as the checker judges it: batches
            # shipped later in the same reaction age episodes that the sink then drops.
            step, bound = self.publish_step, self.bound
            for group in self.groups.values():
                for version, _ in group.inflight.values():
                    if group.stale(version, step, bound):
                        raise NeedsPlainFold(seq, "a stale episode stayed in flight")
        elif world_kind == "run_finished" and (self.groups or self.inflight):
            raise NeedsPlainFold(seq, "not quiescent at run_finished")

    # --- dispatcher rows -------------------------------------------------------------------

    def on_group_opened(self, seq: int, group_id: str, work: str, size: int, live: bool) -> None:
        number = len(self.registry.members)
        if group_id != f"g{number}" or group_id in self.groups or self.finished:
            raise NeedsPlainFold(seq, "group id out of order, or opened after run_finished")
        self.registry.opened()
        self.groups[group_id] = FusedGroup(number, size, work == "train", live, unscheduled=size)
        self.dispatcher_groups += 1

    def on_dispatched(
        self, seq: int, episode_id: str, group_id: str, member: int, version: int
    ) -> None:
        group = self.groups.get(group_id)
        if (
            group is None
            or not group.dispatcher_open
            or self.finished
            or len(self.inflight) >= self.limit
            or group.unscheduled <= 0
            or member != group.dispatched
            or episode_id != f"{group_id}/{member}"
        ):
            raise NeedsPlainFold(seq, "dispatch the plain fold would refuse or flag")
        if self.capacity and group.train:
            horizon = (self.bound + self.version + 1) * (self.config.batch_size or 0)
            if self.train_promised >= horizon and self.train_inflight:
                raise NeedsPlainFold(seq, "train dispatch past the capacity horizon")
            self.train_promised += 1
            self.train_inflight += 1
        group.dispatched += 1
        group.unscheduled -= 1
        group.inflight[episode_id] = (version, member)
        self.inflight[episode_id] = group
        self.registry.dispatched(group.number)

    def on_cancelled(
        self, seq: int, group_id: str, episode_ids: list[str], unscheduled: int, reason: str
    ) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.dispatcher_open or reason not in MODELLED_REASONS:
            raise NeedsPlainFold(seq, "cancellation for a group that is not open, or unmodelled")
        if not 0 <= unscheduled <= group.unscheduled:
            raise NeedsPlainFold(seq, "cancels members the group does not owe")
        if reason == "straggler":
            self._check_straggler(seq, group, episode_ids, unscheduled)
        if self.capacity and group.train:
            self.train_promised -= len(episode_ids)
            self.train_inflight -= len(episode_ids)
        stale = reason == "stale"
        step, bound = self.step, self.bound
        for episode_id in episode_ids:
            found = group.inflight.pop(episode_id, None)
            if found is None or (stale and not group.stale(found[0], step, bound)):
                raise NeedsPlainFold(seq, "cancels an episode not in flight, or not stale")
            del self.inflight[episode_id]
        group.unscheduled -= unscheduled
        count = len(episode_ids) + unscheduled
        group.cancelled += count
        if len(group.arrived) + group.cancelled > group.size:
            raise NeedsPlainFold(seq, "accounts for more than G members")
        collector = self.collector
        collector.cancelled[reason] += len(episode_ids)
        collector.unscheduled_cancelled += unscheduled
        self._close_if_done(group)

    def _check_straggler(
        self, seq: int, group: FusedGroup, episode_ids: list[str], unscheduled: int
    ) -> None:
        """A straggler cut needs a fresh arrival at risk and cancels all the group owes."""
        at_risk = (
            group.train
            and group.live
            and any(
                reward is not None
                and episode_id not in group.dropped
                and (self.step - 1) - version == self.bound
                for episode_id, (_, version, reward) in group.arrived.items()
            )
        )
        whole = set(group.inflight) <= set(episode_ids) and unscheduled == group.unscheduled
        if not (at_risk and whole):
            raise NeedsPlainFold(seq, "a straggler cut without an arrival at risk, or partial")

    def _close_if_done(self, group: FusedGroup) -> None:
        if not group.inflight and not group.unscheduled:
            group.dispatcher_open = False
            self.dispatcher_groups -= 1

    # --- world rows ------------------------------------------------------------------------

    def on_arrival(self, seq: int, episode_id: str, reward: float | None) -> None:
        """A completion (`reward` set) or a failure (`reward` None)."""
        group = self.inflight.pop(episode_id, None)
        if group is None:
            self._late(seq, episode_id)
            return
        version, member = group.inflight.pop(episode_id)
        if self.capacity and group.train:
            self.train_inflight -= 1
        group.arrived[episode_id] = (member, version, reward)
        self._close_if_done(group)

    def _late(self, seq: int, episode_id: str) -> None:
        """An arrival of a dispatched episode no longer in flight (cancelled, or arrived
        before): recorded and ignored. One never dispatched is not ours to judge."""
        if not self.registry.knows(episode_id):
            raise NeedsPlainFold(seq, "arrival of an episode never dispatched")
        self.collector.late += 1

    def on_version_pending(self, version: int) -> None:
        self.version = version
        self.publish_step = self.step
        self._summary_texts()

    def on_limit_set(self, max_inflight: int) -> None:
        self.limit = max_inflight
        self._summary_texts()

    def on_run_finished(self, reason: str) -> None:
        self.finished = True
        self.collector.finished_reason = reason

    # --- sink rows -------------------------------------------------------------------------

    def on_dropped(self, seq: int, episode_id: str, reason: str, age: int) -> None:
        queued = self.queue.pop(episode_id, None)
        if queued is not None:
            version, live = queued
        else:
            group = self.groups.get(episode_id.rpartition("/")[0])
            arrival = group.arrived.get(episode_id) if group is not None else None
            if group is None or arrival is None or episode_id in group.dropped:
                raise NeedsPlainFold(seq, "drops an episode neither queued nor arrived")
            group.dropped.add(episode_id)
            version, live = arrival[1], group.train and group.live
        self.train_promised -= 1  # the checker counts every drop, queued or arrived
        actual = (self.step - 1) - version
        if reason not in DROP_REASONS or age != actual or not (live and actual > self.bound):
            raise NeedsPlainFold(seq, "drop with a wrong age, or of a fresh episode")
        self.collector.dropped_stale += 1

    def on_scored(
        self,
        seq: int,
        group_id: str,
        episode_ids: list[str],
        advantages: list[float],
        admitted: bool,
    ) -> None:
        group = self.groups.pop(group_id, None)
        if (
            group is None
            or group.dispatcher_open
            or len(group.arrived) + group.cancelled != group.size
        ):
            raise NeedsPlainFold(seq, "scores a group that is not complete")
        fresh = sorted(
            (member, episode_id, reward)
            for episode_id, (member, _, reward) in group.arrived.items()
            if reward is not None and episode_id not in group.dropped
        )
        if episode_ids != [episode_id for _, episode_id, _ in fresh]:
            raise NeedsPlainFold(seq, "scores other members than the fresh successful ones")
        if admitted and not episode_ids:
            raise NeedsPlainFold(seq, "admits a group with no scored member")
        if not group.train:
            if advantages or admitted:
                raise NeedsPlainFold(seq, "trains an eval group")
            return
        expected = grpo_advantages([reward for _, _, reward in fresh if reward is not None])
        if len(advantages) != len(expected) or not all(
            abs(a - b) <= ADVANTAGE_TOLERANCE for a, b in zip(advantages, expected, strict=True)
        ):  # written as the checker writes it, so that a NaN fails here as it fails there
            raise NeedsPlainFold(seq, "advantages are not GRPO over the scored rewards")
        collector = self.collector
        collector.scored += len(episode_ids)
        collector.partial += len(episode_ids) < group.size
        collector.admitted_groups += admitted
        if self.capacity:
            kept = sum(episode_id not in group.dropped for episode_id in group.arrived)
            self.train_promised -= kept - (len(episode_ids) if admitted else 0)
        if admitted:
            for episode_id in episode_ids:
                self.queue[episode_id] = (group.arrived[episode_id][1], group.live)

    def on_shipped(
        self, seq: int, step: int, episode_ids: list[str], trained_ids: list[str]
    ) -> None:
        if step != self.step or len(set(trained_ids)) != len(trained_ids) or self.finished:
            raise NeedsPlainFold(seq, "batch for the wrong step, training an id twice, or late")
        cut: dict[str, int] = {}
        bound, queue = self.bound, self.queue
        for episode_id in episode_ids:
            queued = queue.pop(episode_id, None)
            if queued is None or (queued[1] and (step - 1) - queued[0] > bound):
                raise NeedsPlainFold(seq, "ships an episode not queued, or past the bound")
            cut[episode_id] = queued[0]
        if not cut.keys() >= set(trained_ids):
            raise NeedsPlainFold(seq, "trains an episode it did not cut")
        collector = self.collector
        collector.trained += len(trained_ids)
        collector.pruned += len(episode_ids) - len(trained_ids)
        for episode_id in trained_ids:
            collector.trained_ages[(step - 1) - cut[episode_id]] += 1
        self.step = step + 1
        self._summary_texts()
