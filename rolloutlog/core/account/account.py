"""The account of a run: every property checked on every event, and the run summary.

The one entry point (`Account`) of the independent check, kept apart from the deciders and
trusting none of their state or arithmetic: its own rollout age, staleness and GRPO
advantages (from the core it imports only the config, the dispatch registry, the run
summary and the handler table), fed plain values. The reaction loop feeds it as an observer
(tests, the simulator, the live runtime), `replay`'s plain fold feeds it event objects
(`observe`, through `FEEDS`, a handler table like the deciders'), and the columnar fold
straight from log columns (the `on_*` methods), so each rule is written once.

Here are the flows of the dispatcher's and the world's events and the shared books they keep
(`core.account.books`); the sink's are in `core.account.sink`. Each rule's check owns its
books in its own module and is fed at its points of these flows, only by a run that uses
it (`core.account.checks`).

It checks, each at the seq where it broke:
- bound: nothing ships past `max_off_policy_steps`; drops and stale cancellations are of
  episodes that are stale, with their true age;
- stamping: each episode carries the current version at its own dispatch (per-group: its
  group's start version, the version its group opened at);
- ship hold: batch `s` ships only once the trainer is at `policy_version ≥ s − 1 − target_lag`;
- dispatch gate: no train dispatch while `(step − 1) − policy_version > target_lag`, where
  the run keeps a gate (`dispatch_gate`);
- conservation: each dispatched episode arrives or is cancelled once; a group finalizes
  with arrived + cancelled = G + r, at most G arrived (`redundancy`); nothing is open at
  `run_finished`, and nothing is opened, dispatched or shipped after it;
- versions: each `version_pending` announces a new version whose batch has shipped
  (`version < v ≤ batches shipped`); restarts (`restart`);
- permits: never above the limit at admission (and, under a loop, as many permits held as
  episodes in flight); each admission rule's inequality (`admission`, `budget`);
- scoring: exactly the fresh successful arrivals, with GRPO advantages; straggler cuts
  only of at-risk groups, and whole;
- the field's rules, each in its module: `requeue`, `withhold`, `eviction`, `leftovers`,
  `ship_wait`, `partial` (interruptions, and the update pause: under `update_pause =
  "until-live"` no batch ships and no train episode goes out while an update is under
  way), `mask`, `tokens` (the token age split).
Which of the bound, no-stale-in-flight (`in_flight`) and admission properties a run keeps
is its policy's (`core.account.properties`); what trains past the bound is counted either
way. It also counts what `replay --json` reports in a `core.run_summary.RunSummary`.

Memory is bounded by open groups and queued episodes, plus one small count per group ever
opened (members dispatched), which tells a late arrival from one never dispatched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

import rolloutlog.core.account.sink as sink
from rolloutlog.core.account.books import Books
from rolloutlog.core.account.checks import Checks
from rolloutlog.core.account.groups import Group, age
from rolloutlog.core.config import RunConfig
from rolloutlog.core.handlers import Handlers
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
    RunResumed,
    VersionLive,
    VersionPending,
)


class HoldsDispatcher(Protocol):
    """Anything that folds the dispatcher: the reaction loop, or replay's log fold (the
    states of both deciders as `state`, a `core.decider.Pair`)."""

    @property
    def state(self) -> Any: ...


class Account(Books):
    """The account; `on_*` apply one event's values, `feed` and `observe` one event object.

    With `raise_on_violation`, the first broken property raises `InvariantViolation`;
    otherwise each is collected in `violations` as "seq N (kind): what broke" and the
    event's remaining checks are skipped.
    """

    def __init__(self, config: RunConfig, *, raise_on_violation: bool = True) -> None:
        super().__init__(config, raise_on_violation=raise_on_violation)
        self.checks = Checks(self, config)
        self.feeds = FEEDS.by_kind

    def _moved(self) -> None:
        """Step or version moved: keep the gate with them."""
        self.gated = self.lags()
        for hook in self.checks.moved:
            hook()

    # --- events as objects ---------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Count and check one event object (the plain fold); `observe` without a loop."""
        self.observe(event)

    def observe(self, event: Event, loop: HoldsDispatcher | None = None) -> None:
        """Count and check one appended event; with a loop, also compare permits with its
        dispatcher. The body of `feed` too: the loop calls this once per simulated event."""
        run = self.run  # `RunSummary.count`, inline: this runs once per simulated event
        run.events += 1
        run.kinds[event.kind] += 1
        self.now = event.t
        feed = self.feeds.get(type(event))
        if feed is not None:
            feed(self, event)
        if loop is not None:
            held = len(loop.state.dispatcher.inflight)  # an attribute: read per event
            if held != len(self.inflight):
                problem = f"dispatcher holds {held} permits, {len(self.inflight)} in flight"
                self.fail(event.seq, event.kind, problem)

    def settled(self, world_event: Event, loop: HoldsDispatcher | None = None) -> None:
        """After a world event's reactions (see `settle`)."""
        self.settle(world_event.seq, world_event.kind)

    def settle(self, seq: int, world_kind: str) -> None:
        """After a world event settled: the checks that hold once its reactions are in, and
        at `run_finished` nothing is open."""
        if self.checks.settled:
            for hook in self.checks.settled:
                hook(seq, world_kind)
        if world_kind == "version_pending":
            for hook in self.checks.update_settled:
                hook(seq, world_kind)
        elif world_kind == "run_resumed":
            self.checks.restarts.settled(seq)
        elif world_kind == "run_finished":
            if self.groups:
                self.fail(seq, world_kind, f"groups left open: {sorted(self.groups)[:5]}")
            if self.inflight:
                self.fail(seq, world_kind, f"{len(self.inflight)} episodes in flight at the end")

    # --- dispatcher events ---------------------------------------------------------------

    def on_group_opened(
        self,
        seq: int,
        group_id: str,
        work: str,
        size: int,
        frozen: bool,
        version: int,
        step: int,
        task: tuple[str, str],
    ) -> None:
        kind = "group_opened"
        number = len(self.registry.members)
        self.registry.opened()
        if self.finished:
            self.fail(seq, kind, "group opened after run_finished")
        if group_id != f"g{number}" or group_id in self.groups:
            return self.fail(seq, kind, f"expected g{number}, got {group_id}")
        if version != self.version or step != self.step:
            self.fail(seq, kind, f"opened at v{version} step {step}, not v{self.version}")
        train = work == "train"
        if train:
            for hook in self.checks.opening:
                hook(seq)
        group = Group(number, size, train, frozen, version)
        group.unscheduled = self.members(group)
        self.groups[group_id] = group
        if train:
            for opened in self.checks.opened:
                opened(seq, group_id, group, task)
        return None

    def on_dispatched(
        self, seq: int, episode_id: str, group_id: str, member: int, version: int
    ) -> None:
        kind = "episode_dispatched"
        group = self.groups.get(group_id)
        if group is not None and group.train and self.checks.dispatching:
            for hook in self.checks.dispatching:
                hook(seq, group)
        if group is None or not group.owes or group.unscheduled <= 0:
            return self.fail(seq, kind, f"dispatch into {group_id}, which owes no member")
        if member != group.dispatched or episode_id != f"{group_id}/{member}":
            return self.fail(seq, kind, f"{episode_id} is not member {group.dispatched}")
        if self.finished:
            self.fail(seq, kind, "dispatch after run_finished")
        if len(self.inflight) >= self.limit:
            self.fail(seq, kind, f"admitted above the limit {self.limit}")
        stamp = self.version if self.per_episode else group.start_version
        if version != stamp:
            self.fail(seq, kind, f"stamped v{version}, dispatched when v{stamp} applies")
        if group.train:
            if self.gated and self.dispatch_gate:
                lag = age(self.version, self.step)
                problem = f"train dispatch while the trainer lags {lag} > target_lag"
                self.fail(seq, kind, problem)
            if self.checks.admitted:
                for admitted in self.checks.admitted:
                    admitted(seq, kind)
        group.dispatched += 1
        group.unscheduled -= 1
        group.inflight[episode_id] = (version, member)
        self.inflight[episode_id] = group
        if self.checks.dispatched:
            for dispatched in self.checks.dispatched:
                dispatched(version)
        self.registry.dispatched(group.number)
        return None

    def on_cancelled(
        self, seq: int, group_id: str, episode_ids: Sequence[str], unscheduled: int, reason: str
    ) -> None:
        kind, checks = "episodes_cancelled", self.checks
        self.run.cancelled_by[reason] += len(episode_ids)
        self.run.unscheduled_cancelled += unscheduled
        group = self.groups.get(group_id)
        if group is None or not group.owes:
            return self.fail(seq, kind, f"cancellation for {group_id}, which owes nothing")
        if not 0 <= unscheduled <= group.unscheduled:
            return self.fail(seq, kind, f"cancels {unscheduled} unscheduled of {group_id}")
        if reason == "straggler":
            self._check_straggler(seq, group, episode_ids, unscheduled)
        elif reason == "restart":
            checks.restarts.cancelled(seq, episode_ids, unscheduled)
        elif reason == "leftover":
            checks.leftovers.cancelled_leftover(seq, group_id, episode_ids, unscheduled)
        elif reason == "redundant":
            checks.redundancy.cancelled_redundant(seq, group_id, group, episode_ids, unscheduled)
        for hook in checks.cancelled:
            hook(seq, group_id, group, episode_ids, reason)
        stale = reason == "stale"
        stale_stamps: list[tuple[str, int]] = []  # each member stale by its stamp
        for episode_id in episode_ids:
            found = group.inflight.pop(episode_id, None)
            if found is None:
                return self.fail(seq, kind, f"{episode_id} cancelled but not in flight")
            if stale and not group.stale(found[0], self.step, self.bound):
                self.fail(seq, kind, f"{episode_id} is not stale")
            elif stale:
                stale_stamps.append((episode_id, found[0]))
            del self.inflight[episode_id]
        if stale:
            for hook in checks.stale_cancelled:
                hook(seq, group, stale_stamps, unscheduled)
        # Each member is exactly one of unscheduled, in flight, arrived or cancelled: the
        # checks above keep it so, and no group accounts for more than its members.
        group.unscheduled -= unscheduled
        group.cancelled += len(episode_ids) + unscheduled
        self._close_if_done(group)
        return None

    def _check_straggler(
        self, seq: int, group: Group, episode_ids: Sequence[str], unscheduled: int
    ) -> None:
        """A straggler cut needs a fresh arrival at risk and cancels all the group owes."""
        if not group.at_risk(self.step, self.bound):
            self.fail(seq, "episodes_cancelled", "straggler cut without an arrival at risk")
        if not (set(group.inflight) <= set(episode_ids) and unscheduled == group.unscheduled):
            self.fail(seq, "episodes_cancelled", "straggler cut leaves members owed")

    def _close_if_done(self, group: Group) -> None:
        if group.owes and not group.inflight and not group.unscheduled:
            group.owes = False

    # --- world events --------------------------------------------------------------------

    def on_arrival(
        self,
        seq: int,
        kind: str,
        episode_id: str,
        reward: float | None,
        tokens: int = 0,
        completion_tokens: int | None = None,
    ) -> Group | None:
        """A completion (`reward` set, its prompt and completion `tokens`, of which
        `completion_tokens` generated) or a failure (`reward` None); the group it landed in,
        None for a late arrival."""
        if self.checks.arriving:
            for hook in self.checks.arriving:
                hook(seq, kind, episode_id, completion_tokens)
        group = self.inflight.pop(episode_id, None)
        if group is None:
            self._late(seq, kind, episode_id)
            return None
        version, member = group.inflight.pop(episode_id)
        group.arrived[episode_id] = (member, version, reward, tokens)
        self._close_if_done(group)
        arrived = len(group.arrived)
        if arrived > group.size:
            self.fail(
                seq,
                kind,
                f"{episode_id.rpartition('/')[0]}: {arrived} arrived, more than G={group.size}",
            )
        if self.checks.arrived:
            for hook in self.checks.arrived:
                hook(seq, kind, episode_id, group)
        return group

    def _late(self, seq: int, kind: str, episode_id: str) -> None:
        """An arrival of a dispatched episode no longer in flight (cancelled, arrived before,
        or after `run_finished`): recorded and ignored. One never dispatched is refused."""
        if not self.registry.knows(episode_id):
            return self.fail(seq, kind, f"{episode_id} was never dispatched")
        self.run.late += 1
        return None

    def on_dropped(self, seq: int, episode_id: str, reason: str, recorded_age: int) -> None:
        sink.dropped(self, self.checks, seq, episode_id, reason, recorded_age)

    def on_scored(
        self,
        seq: int,
        group_id: str,
        episode_ids: Sequence[str],
        scored_advantages: Sequence[float],
        admitted: bool,
    ) -> None:
        sink.scored(self, self.checks, seq, group_id, episode_ids, scored_advantages, admitted)

    def on_shipped(
        self,
        seq: int,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        tokens: int,
        masked_tokens: int = 0,
    ) -> None:
        checks = self.checks
        if sink.shipped(self, checks, seq, step, episode_ids, trained_ids, tokens, masked_tokens):
            self.step = step + 1
            self._moved()

    def on_version_pending(self, seq: int, version: int) -> None:
        """Each version is announced once, after its batch: `version < v ≤ shipped`."""
        kind, shipped = "version_pending", self.shipped()
        for hook in self.checks.announcing:
            hook()
        if not self.version < version <= shipped:
            problem = f"v{version} after v{self.version} with {shipped} batches shipped"
            self.fail(seq, kind, f"{problem}: a version is announced once, after its batch")
        self.checks.restarts.announced(seq, version)
        self.version = version
        self.publish_step = self.step
        self._moved()
        for hook in self.checks.announced:
            hook()

    def on_live(self, seq: int, version: int) -> None:
        """`version_live`: inference serves `version` from now on."""
        for hook in self.checks.live:
            hook(seq)
        self.live_version = version

    def on_interrupted(self, seq: int, episode_id: str, tokens: int, reason: str) -> None:
        self.checks.partial.interrupted(seq, episode_id, tokens, reason)

    def on_continued(self, seq: int, episode_id: str, version: int) -> None:
        self.checks.partial.continued(seq, episode_id, version)

    def on_resumed(self, seq: int, episode_ids: Sequence[str], version: int) -> None:
        self.checks.restarts.resumed(seq, episode_ids, version)

    def on_limit_set(self, max_inflight: int) -> None:
        self.limit = max_inflight

    def on_run_finished(self, reason: str) -> None:
        self.finished = True
        self.run.finished_reason = reason

    # --- the run summary -----------------------------------------------------------------

    def summary(self, *, checked: bool = True) -> dict[str, Any]:
        """The `replay --json` object; without `checked`, no violations are listed."""
        return self.run.report(self.violations if checked else [])


# --- which `Account.on_*` flow each event class feeds, with which of its fields ------------
# The deciders' kind of table (`core.handlers`): one dict lookup per event by its class.


def _completed(account: Account, event: EpisodeCompleted) -> None:
    tokens = event.prompt_tokens + event.completion_tokens
    account.on_arrival(
        event.seq, event.kind, event.episode_id, event.reward, tokens, event.completion_tokens
    )


def _failed(account: Account, event: EpisodeFailed) -> None:
    account.on_arrival(event.seq, event.kind, event.episode_id, None)


def _dispatched(account: Account, event: EpisodeDispatched) -> None:
    account.on_dispatched(
        event.seq, event.episode_id, event.group_id, event.member, event.policy_version
    )


def _cancelled(account: Account, event: EpisodesCancelled) -> None:
    account.on_cancelled(
        event.seq, event.group_id, event.episode_ids, event.unscheduled, event.reason
    )


def _opened(account: Account, event: GroupOpened) -> None:
    account.on_group_opened(
        event.seq,
        event.group_id,
        event.work,
        event.group_size,
        event.frozen,
        event.policy_version,
        event.step,
        (event.task_id, event.env),
    )


def _dropped(account: Account, event: EpisodeDropped) -> None:
    # The flow itself, not `on_dropped` (its door for the columnar fold): one call less for
    # each of the many drops of a simulated run.
    sink.dropped(account, account.checks, event.seq, event.episode_id, event.reason, event.age)


def _scored(account: Account, event: GroupScored) -> None:
    account.on_scored(
        event.seq, event.group_id, event.episode_ids, event.advantages, event.admitted
    )


def _shipped(account: Account, event: BatchShipped) -> None:
    account.on_shipped(
        event.seq,
        event.step,
        event.episode_ids,
        event.trained_ids,
        event.tokens,
        event.masked_tokens,
    )


def _pending(account: Account, event: VersionPending) -> None:
    account.on_version_pending(event.seq, event.version)


def _live(account: Account, event: VersionLive) -> None:
    account.on_live(event.seq, event.version)


def _interrupted(account: Account, event: EpisodeInterrupted) -> None:
    account.on_interrupted(event.seq, event.episode_id, event.completion_tokens, event.reason)


def _continued(account: Account, event: EpisodeResumed) -> None:
    account.on_continued(event.seq, event.episode_id, event.policy_version)


def _resumed(account: Account, event: RunResumed) -> None:
    account.on_resumed(event.seq, event.episode_ids, event.version)


def _limit(account: Account, event: LimitSet) -> None:
    account.on_limit_set(event.max_inflight)


def _finished(account: Account, event: RunFinished) -> None:
    account.on_run_finished(event.reason)


FEEDS: Final = (
    Handlers[Account, None]()
    .on(EpisodeCompleted, _completed)
    .on(EpisodeFailed, _failed)
    .on(EpisodeDispatched, _dispatched)
    .on(EpisodesCancelled, _cancelled)
    .on(GroupOpened, _opened)
    .on(EpisodeDropped, _dropped)
    .on(GroupScored, _scored)
    .on(BatchShipped, _shipped)
    .on(VersionPending, _pending)
    .on(VersionLive, _live)
    .on(EpisodeInterrupted, _interrupted)
    .on(EpisodeResumed, _continued)
    .on(RunResumed, _resumed)
    .on(LimitSet, _limit)
    .on(RunFinished, _finished)
)
