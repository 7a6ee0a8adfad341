"""The shadow account of a run: every property checked on every event, and the run summary.

One account, kept apart from the deciders and trusting none of their state or arithmetic:
its own rollout age, staleness and GRPO advantages (from the core it imports only the config
and the dispatch registry), fed plain values. The reaction loop feeds it as an observer (tests, the
simulator, the live runtime), `replay`'s plain fold feeds it from event objects, and the
columnar fold straight from log columns, so each rule is written once, and each piece of
its own arithmetic once (`age`, `past_bound`, `behind` and `advantages` in
`core.account_group`, with a group's books; `lags` and `shipped` here). The sink's events
are checked in `core.account_sink`, the version and restart checks in
`core.account_restart`; which method each event class feeds is `FEEDS`, at the end of this module.

It checks, each at the seq where it broke:
- bound: nothing ships past `max_off_policy_steps`; drops and stale cancellations are of
  episodes that are stale, with their true age;
- stamping: each episode carries the current version at its own dispatch (per-group: its
  group's start version, the version its group opened at);
- ship hold: batch `s` ships only once the trainer is at `policy_version ≥ s − 1 − target_lag`;
- dispatch gate: no train dispatch while `(step − 1) − policy_version > target_lag`;
- conservation: each dispatched episode arrives or is cancelled once; a group finalizes
  with arrived + cancelled = G + r, at most G arrived (`core.account_redundant`: r is
  `group_redundancy`, the members past G cancelled as `redundant` at the G-th arrival);
  nothing is open at `run_finished`, and nothing is opened, dispatched or shipped after it;
- versions: each `version_pending` announces a new version whose batch has shipped
  (`version < v ≤ batches shipped`);
- restarts: a `run_resumed` names exactly what was in flight, resumes from a checkpoint
  between the last announced version and the batches shipped, and only those episodes are
  cancelled (reason `restart`); no version announced after it is inside that checkpoint;
- permits: never above the limit at admission (and, under a loop, as many permits held as
  episodes in flight); capacity admission's horizon, or AReaL admission's (in groups);
- scoring: exactly the fresh successful arrivals, with GRPO advantages; straggler cuts
  only of at-risk groups, and whole;
- requeue (`core.account_requeue`): a group discarded for requeue is discarded whole, where
  the run's rule allows, and its task opened again before any fresh train group;
- withhold (`core.account_withhold`): under `stale_member = "withhold"` no stale
  cancellation, and exactly the scored stale members are withheld, none ships.
- bounded queue (`core.account_eviction`): evictions only from a full queue, of the oldest,
  as few as make room, and the queue never above `queue_limit`.
- update pause (`core.account_partial`): under `update_pause = "until-live"` no batch ships
  and no train episode goes out while an update is under way.
Which of the bound, no-stale-in-flight and admission properties a run keeps is its
policy's (`core.account_properties`); what trains past the bound is counted either way.
It also counts what `replay --json` reports, as it learns what each event means, in a
`core.run_summary.RunSummary` (`summary()`).

Memory is bounded by open groups and queued episodes, plus one small count per group ever
opened (members dispatched), which tells a late arrival from one never dispatched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from rolloutlog.core.account_budget import BudgetChecks
from rolloutlog.core.account_eviction import EvictionChecks
from rolloutlog.core.account_group import NO_LAG, Group, age
from rolloutlog.core.account_mask import MaskChecks
from rolloutlog.core.account_oversample import LeftoverChecks
from rolloutlog.core.account_partial import PartialChecks
from rolloutlog.core.account_properties import (
    AREAL_ADMISSION,
    CAPACITY,
    MAX_LAG_ADMISSION,
    NO_STALE_IN_FLIGHT,
    OUTSTANDING,
    ROLL_ADMISSION,
    SHIP_WAIT,
    areal_problem,
    kept_properties,
    max_lag_problem,
    roll_problem,
)
from rolloutlog.core.account_redundant import RedundancyChecks
from rolloutlog.core.account_requeue import RequeueChecks
from rolloutlog.core.account_restart import RestartChecks
from rolloutlog.core.account_ship_wait import ShipWaitChecks
from rolloutlog.core.account_sink import ADVANTAGE_TOLERANCE, SinkChecks
from rolloutlog.core.account_tokens import TokenAges
from rolloutlog.core.account_withhold import WithholdChecks
from rolloutlog.core.config import RunConfig
from rolloutlog.core.registry import DispatchRegistry
from rolloutlog.core.run_summary import RunSummary
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

__all__ = ["ADVANTAGE_TOLERANCE", "Account", "Group", "HoldsDispatcher", "InvariantViolation"]


class InvariantViolation(AssertionError):
    """A property does not hold at the named seq."""


class HoldsDispatcher(Protocol):
    """Anything that folds the dispatcher: the reaction loop, or replay's log fold."""

    @property
    def dispatcher_state(self) -> Any: ...


class Account(
    SinkChecks,
    RestartChecks,
    RequeueChecks,
    BudgetChecks,
    ShipWaitChecks,
    PartialChecks,
    TokenAges,
    MaskChecks,
    WithholdChecks,
    EvictionChecks,
    LeftoverChecks,
    RedundancyChecks,
):
    """The account; `on_*` apply one event's values, `feed` one event object.

    With `raise_on_violation`, the first broken property raises `InvariantViolation`;
    otherwise each is collected in `violations` as "seq N (kind): what broke" and the
    event's remaining checks are skipped.
    """

    def __init__(self, config: RunConfig, *, raise_on_violation: bool = True) -> None:
        self.raise_on_violation = raise_on_violation
        self.violations: list[str] = []
        self.bound: int = config.max_off_policy_steps
        # prime-rl's gate and hold allow a lag of one whatever the bound, slime's train.py
        # none (`gate_lag`); a version every K batches (`updates_per_sync`) adds K − 1
        lags = {"one": 1, "zero": 0, "none": NO_LAG}
        lag = lags.get(config.gate_lag, config.target_lag)
        self.target_lag: int = lag + config.updates_per_sync - 1  # the ship hold's
        self.gate_lag = self.target_lag if config.dispatch_gate else NO_LAG  # AReaL, ROLL: none
        self.group_size: int = config.group_size
        self.redundancy: int = config.group_redundancy
        self.redundant_due: set[str] = set()
        self.roll_used = 0  # train groups opened and not aborted (ROLL admission)
        self.accepted = 0  # train episodes admitted (AReaL's accepted, in groups of G)
        self.roll_lost = 0  # train members failed in groups not aborted (ROLL's, in G's)
        self.batch_size: int | None = config.batch_size
        self.config = config
        self.kept = kept_properties(config)
        self.per_episode = config.staleness != "per-group"  # how each episode is stamped
        self.capacity = CAPACITY in self.kept
        self.requeue_rule: str = config.requeue
        self.tasks: dict[str, tuple[str, str]] = {}
        self.requeue: dict[str, int] = {}  # owed -> train groups opened since its discard
        self.discarded: set[str] = set()
        self.withholds = config.stale_member == "withhold"  # stale members scored, not shipped
        self.runs_on = config.stale_member != "cancel"  # nothing cancelled for its age
        self.to_withhold: dict[str, int] = {}
        self.queue_limit, self.eviction_rule = config.queue_limit, config.queue_eviction
        self.evicting: list[str] = []
        self.aborts = config.leftovers == "abort"
        self.opened_at: dict[str, int] = {}
        self.queued_at: dict[str, int] = {}
        self.step, self.version, self.limit = 1, 0, config.max_inflight
        self.publish_step = 1  # the step when the last version update arrived
        self.updates = 0  # versions announced
        self.groups: dict[str, Group] = {}  # open until group_scored
        self.inflight: dict[str, Group] = {}
        self.queue: dict[str, tuple[int, bool, int]] = {}  # id -> (version, ages, tokens)
        self.registry = DispatchRegistry()  # tells a late arrival from a bogus one
        self.finished = False
        self.train_promised = 0  # trained + queued + arrived-unfinalized + in flight (train)
        self.train_inflight = 0
        self.restart_ids: frozenset[str] = frozenset()  # outstanding at the latest restart
        self.resumed_from: int | None = None  # the checkpoint of the latest restart
        self.gated = self.lags()  # kept with step and version: train dispatch must pause
        self.run = RunSummary(
            ship_wait=config.ship_wait != "none",
            withholds=self.withholds,
            masks=config.stale_tokens == "mask",
        )
        self.ship_wait, self.now, self.wait_since = SHIP_WAIT in self.kept, 0.0, None
        self.unpublished: dict[int, set[str]] = {}
        self._partial_start(config)
        self._tokens_start(config)
        self._mask_start(config)
        self.feeds = feeds_for(config)

    # --- reporting -----------------------------------------------------------------------

    def _fail(self, seq: int, kind: str, problem: str) -> None:
        message = f"seq {seq} ({kind}): {problem}"
        if self.raise_on_violation:
            raise InvariantViolation(message)
        self.violations.append(message)

    # --- its own arithmetic, each rule once ---------------------------------------------

    def shipped(self) -> int:
        """Batches shipped so far (the step is the one the next batch trains)."""
        return self.step - 1

    def lags(self) -> bool:
        """The trainer lags the step by more than `target_lag`: the dispatch gate is shut,
        and batch `step` may not ship (the ship hold)."""
        return age(self.version, self.step) > self.target_lag

    def _moved(self) -> None:
        """Step or version moved: keep the gate with them."""
        self.gated = self.lags()
        self._wait_watch()

    # --- events as objects ---------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Count and check one event object (the plain fold); `observe` without a loop."""
        self.observe(event)

    # --- the reaction loop's observer protocol ---------------------------------------------

    def observe(self, event: Event, loop: HoldsDispatcher | None = None) -> None:
        """Count and check one appended event; with a loop, also compare permits with its
        dispatcher. The body of `feed` too: the loop calls this once per simulated event."""
        run = self.run  # `RunSummary.count`, inline: this runs once per simulated event
        run.events += 1
        run.kinds[event.kind] += 1
        self.now = event.t
        feed_kind = self.feeds.get(type(event))
        if feed_kind is not None:
            feed_kind(self, event)
        if loop is not None:
            held = len(loop.dispatcher_state.inflight)
            if held != len(self.inflight):
                problem = f"dispatcher holds {held} permits, {len(self.inflight)} in flight"
                self._fail(event.seq, event.kind, problem)

    def settled(self, world_event: Event, loop: HoldsDispatcher | None = None) -> None:
        """After a world event's reactions (see `settle`)."""
        self.settle(world_event.seq, world_event.kind)

    def settle(self, seq: int, world_kind: str) -> None:
        """After a world event settled: no train episode stale when a version update arrived
        is still in flight (per-episode; per-group dispatches a group's late members at its
        start version, stale or not), and at `run_finished` nothing is open.

        Staleness is judged at the step the update arrived at: batches shipped later in the
        same reaction can age episodes further, and those the sink drops when they arrive.
        Episodes at the announced version were dispatched after it arrived: only a lag above
        the bound (prime-rl's `gate_lag = "one"` at bound 0) lets those out stale.
        """
        self._leftover_settled(seq, world_kind)
        if world_kind == "version_pending" and NO_STALE_IN_FLIGHT in self.kept:
            step, bound, announced = self.publish_step, self.bound, self.version
            for group_id, group in self.groups.items():
                for episode_id, (stamp, _) in group.inflight.items():
                    version = self._goes_on_under(episode_id, stamp)
                    if version != announced and group.stale(version, step, bound):
                        self._fail(seq, world_kind, f"stale {episode_id} of {group_id} in flight")
        if self.redundant_due:
            self._redundant_settled(seq, world_kind)
        if world_kind == "run_resumed":
            self._restart_settled(seq)
        elif world_kind == "run_finished":
            if self.groups:
                self._fail(seq, world_kind, f"groups left open: {sorted(self.groups)[:5]}")
            if self.inflight:
                self._fail(seq, world_kind, f"{len(self.inflight)} episodes in flight at the end")

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
            self._fail(seq, kind, "group opened after run_finished")
        if group_id != f"g{number}" or group_id in self.groups:
            return self._fail(seq, kind, f"expected g{number}, got {group_id}")
        if version != self.version or step != self.step:
            self._fail(seq, kind, f"opened at v{version} step {step}, not v{self.version}")
        if work == "train" and AREAL_ADMISSION in self.kept:
            groups, accepted = self.groups.values(), self.accepted // self.group_size
            problem = areal_problem(self.config, self.version, groups, accepted)
            if problem:
                self._fail(seq, kind, problem)
        if work == "train" and OUTSTANDING in self.kept:
            self._outstanding_opened(seq)
        if work == "train" and MAX_LAG_ADMISSION in self.kept:
            opened, groups = len(self.tasks), self.groups.values()
            problem = max_lag_problem(self.config, opened, self.updates, groups)
            if problem:
                self._fail(seq, kind, problem)
        if work == "train" and ROLL_ADMISSION in self.kept:
            running = sum(g.train for g in self.groups.values())
            used = self.roll_used - self.roll_lost // self.group_size
            problem = roll_problem(self.config, self.version, used, running)
            if problem:
                self._fail(seq, kind, problem)
        self.roll_used += work == "train"
        group = Group(number, size, work == "train", frozen, version)
        group.unscheduled = self.members(group)
        self.groups[group_id] = group
        if work == "train":
            self._requeue_opened(seq, group_id, task)
            self._budget_opened(seq)
            self._leftover_opened(group_id)
        return None

    def on_dispatched(
        self, seq: int, episode_id: str, group_id: str, member: int, version: int
    ) -> None:
        kind = "episode_dispatched"
        group = self.groups.get(group_id)
        if group is None or not group.owes or group.unscheduled <= 0:
            return self._fail(seq, kind, f"dispatch into {group_id}, which owes no member")
        if member != group.dispatched or episode_id != f"{group_id}/{member}":
            return self._fail(seq, kind, f"{episode_id} is not member {group.dispatched}")
        if self.finished:
            self._fail(seq, kind, "dispatch after run_finished")
        if len(self.inflight) >= self.limit:
            self._fail(seq, kind, f"admitted above the limit {self.limit}")
        stamp = self.version if self.per_episode else group.start_version
        if version != stamp:
            self._fail(seq, kind, f"stamped v{version}, dispatched when v{stamp} applies")
        if group.train and (self.gated or self.capacity):
            self._admit_train(seq, kind)
        if group.train and self.update_pause:
            self._paused_by_update(seq, kind, dispatch=True)
        group.dispatched += 1
        group.unscheduled -= 1
        group.inflight[episode_id] = (version, member)
        self.inflight[episode_id] = group
        if self.ship_wait and age(version, self.step) >= self.bound:
            self._wait_watch()  # dispatched at or past its last chance (a lag of K - 1 > bound)
        self.registry.dispatched(group.number)
        return None

    def _admit_train(self, seq: int, kind: str) -> None:
        """The dispatch gate, and capacity admission's horizon (no train dispatch once the
        promised work fills it, unless none is in flight: the liveness exception)."""
        lag = age(self.version, self.step)
        if lag > self.gate_lag:
            self._fail(seq, kind, f"train dispatch while the trainer lags {lag} > target_lag")
        if self.capacity:
            horizon = (self.bound + self.version + 1) * (self.batch_size or 0)
            waits = self.train_inflight or not self.config.liveness
            if self.train_promised >= horizon and waits:
                self._fail(seq, kind, f"capacity: {self.train_promised} promised of {horizon}")
            self.train_promised += 1
            self.train_inflight += 1

    def on_cancelled(
        self, seq: int, group_id: str, episode_ids: Sequence[str], unscheduled: int, reason: str
    ) -> None:
        kind = "episodes_cancelled"
        self.run.cancelled_by[reason] += len(episode_ids)
        self.run.unscheduled_cancelled += unscheduled
        group = self.groups.get(group_id)
        if group is None or not group.owes:
            return self._fail(seq, kind, f"cancellation for {group_id}, which owes nothing")
        if not 0 <= unscheduled <= group.unscheduled:
            return self._fail(seq, kind, f"cancels {unscheduled} unscheduled of {group_id}")
        if reason == "straggler":
            self._check_straggler(seq, group, episode_ids, unscheduled)
        elif reason == "restart":
            self._check_restart_cancel(seq, episode_ids, unscheduled)
        elif reason == "leftover":
            self._leftover_cancelled(seq, group_id, episode_ids, unscheduled)
        elif reason == "redundant":
            self._redundant_cancel(seq, group_id, group, episode_ids, unscheduled)
        self._withhold_cancelled(seq, reason)
        if self.capacity and group.train:
            self.train_promised -= len(episode_ids)
            self.train_inflight -= len(episode_ids)
        stale = reason == "stale"
        if stale and group.train and not group.aborted:
            group.aborted = True
            self.roll_used -= 1
        stale_stamps: list[tuple[str, int]] = []  # each member stale by its stamp
        for episode_id in episode_ids:
            found = group.inflight.pop(episode_id, None)
            if found is None:
                return self._fail(seq, kind, f"{episode_id} cancelled but not in flight")
            if stale and not group.stale(found[0], self.step, self.bound):
                self._fail(seq, kind, f"{episode_id} is not stale")
            elif stale:
                stale_stamps.append((episode_id, found[0]))
            del self.inflight[episode_id]
        if stale and self.masks:
            self._mask_cancelled(seq, group, stale_stamps, unscheduled)
        group.unscheduled -= unscheduled
        group.cancelled += len(episode_ids) + unscheduled
        if len(group.arrived) + group.cancelled > self.members(group):
            self._fail(seq, kind, f"{group_id} accounts for more than {self.members(group)}")
        self._close_if_done(group)
        return None

    def _check_straggler(
        self, seq: int, group: Group, episode_ids: Sequence[str], unscheduled: int
    ) -> None:
        """A straggler cut needs a fresh arrival at risk and cancels all the group owes."""
        if not group.at_risk(self.step, self.bound):
            self._fail(seq, "episodes_cancelled", "straggler cut without an arrival at risk")
        if not (set(group.inflight) <= set(episode_ids) and unscheduled == group.unscheduled):
            self._fail(seq, "episodes_cancelled", "straggler cut leaves members owed")

    def _scored_room(self, group: Group, scored: int, admitted: bool) -> None:
        """A train group scored: its admitted members count toward AReaL's accepted groups
        and verl's sync window, and its failed members toward ROLL's budget given back."""
        if not group.train:
            return
        self.accepted += scored if admitted else 0
        self.budget_queued += scored if admitted else 0  # verl's window (`account_budget`)
        if not group.aborted:
            self.roll_lost += sum(reward is None for _, _, reward, _ in group.arrived.values())

    def _close_if_done(self, group: Group) -> None:
        if group.owes and not group.inflight and not group.unscheduled:
            group.owes = False

    # --- world events --------------------------------------------------------------------

    def on_arrival(
        self, seq: int, kind: str, episode_id: str, reward: float | None, tokens: int = 0
    ) -> Group | None:
        """A completion (`reward` set, its prompt and completion `tokens`) or a failure
        (`reward` None); the group it landed in, None for a late arrival."""
        group = self.inflight.pop(episode_id, None)
        if group is None:
            self._late(seq, kind, episode_id)
            return None
        version, member = group.inflight.pop(episode_id)
        if self.capacity and group.train:
            self.train_inflight -= 1
        group.arrived[episode_id] = (member, version, reward, tokens)
        self._close_if_done(group)
        if len(group.arrived) >= group.size:  # before the G-th it checks nothing
            self._redundant_arrived(seq, kind, episode_id.rpartition("/")[0], group)
        return group

    def _late(self, seq: int, kind: str, episode_id: str) -> None:
        """An arrival of a dispatched episode no longer in flight (cancelled, arrived before,
        or after `run_finished`): recorded and ignored. One never dispatched is refused."""
        if not self.registry.knows(episode_id):
            return self._fail(seq, kind, f"{episode_id} was never dispatched")
        self.run.late += 1
        return None

    def on_limit_set(self, max_inflight: int) -> None:
        self.limit = max_inflight

    def on_run_finished(self, reason: str) -> None:
        self.finished = True
        self.run.finished_reason = reason

    # --- the run summary -----------------------------------------------------------------

    def summary(self, *, checked: bool = True) -> dict[str, Any]:
        """The `replay --json` object; without `checked`, no violations are listed."""
        return self.run.report(self.violations if checked else [])


# --- which `Account.on_*` method each event class feeds, with which of its fields ----------
# `Account.observe` looks an event's class up here (event classes are final): one dict
# lookup per event instead of a `match` that tries every class pattern in turn.


def _completed(account: Account, event: EpisodeCompleted) -> None:
    account._tokens_arrived(event.episode_id, event.completion_tokens)
    account._partial_arrival(event.seq, event.kind, event.episode_id, event.completion_tokens)
    _completed_plain(account, event)


def _failed(account: Account, event: EpisodeFailed) -> None:
    account._partial_arrival(event.seq, event.kind, event.episode_id, None)
    _failed_plain(account, event)


def _shipped(account: Account, event: BatchShipped) -> None:
    account._partial_shipped(event.episode_ids, event.trained_ids)
    account._tokens_shipped(event.step, event.episode_ids, event.trained_ids)
    _shipped_plain(account, event)


def _dispatched(account: Account, event: EpisodeDispatched) -> None:
    account._partial_dispatched(event.seq, event.group_id)
    _dispatched_plain(account, event)


def _announced(account: Account, event: VersionPending) -> None:
    account._partial_announced()
    _announced_plain(account, event)


def _completed_plain(account: Account, event: EpisodeCompleted) -> None:
    tokens = event.prompt_tokens + event.completion_tokens
    account.on_arrival(event.seq, event.kind, event.episode_id, event.reward, tokens)


def _failed_plain(account: Account, event: EpisodeFailed) -> None:
    account.on_arrival(event.seq, event.kind, event.episode_id, None)


def _shipped_plain(account: Account, event: BatchShipped) -> None:
    account.on_shipped(
        event.seq,
        event.step,
        event.episode_ids,
        event.trained_ids,
        event.tokens,
        event.masked_tokens,
    )


def _dispatched_plain(account: Account, event: EpisodeDispatched) -> None:
    account.on_dispatched(
        event.seq, event.episode_id, event.group_id, event.member, event.policy_version
    )


def _announced_plain(account: Account, event: VersionPending) -> None:
    account.on_version_pending(event.seq, event.version)


# A run that neither interrupts, drains nor recycles work, and drops (not masks) stale
# tokens, keeps no books of segments, spans or token ages: those feeds skip them.
_PLAIN: Final[dict[type[Event], Callable[[Account, Any], object]]] = {
    EpisodeCompleted: _completed_plain,
    EpisodeFailed: _failed_plain,
    BatchShipped: _shipped_plain,
    EpisodeDispatched: _dispatched_plain,
    VersionPending: _announced_plain,
}


def feeds_for(config: RunConfig) -> dict[type[Event], Callable[[Account, Any], object]]:
    """The feed table of a run under `config`: `FEEDS`, less the books it never keeps."""
    books = config.weight_update != "freeze" or config.recycle or config.stale_tokens == "mask"
    return FEEDS if books else {**FEEDS, **_PLAIN}


FEEDS: Final[dict[type[Event], Callable[[Account, Any], object]]] = {
    EpisodeCompleted: _completed,
    EpisodeFailed: _failed,
    EpisodeDispatched: _dispatched,
    EpisodesCancelled: lambda a, e: a.on_cancelled(
        e.seq, e.group_id, e.episode_ids, e.unscheduled, e.reason
    ),
    GroupOpened: lambda a, e: a.on_group_opened(
        e.seq,
        e.group_id,
        e.work,
        e.group_size,
        e.frozen,
        e.policy_version,
        e.step,
        (e.task_id, e.env),
    ),
    EpisodeDropped: lambda a, e: a.on_dropped(e.seq, e.episode_id, e.reason, e.age),
    GroupScored: lambda a, e: a.on_scored(
        e.seq, e.group_id, e.episode_ids, e.advantages, e.admitted
    ),
    BatchShipped: _shipped,
    VersionPending: _announced,
    VersionLive: lambda a, e: a.on_live(e.seq, e.version),
    EpisodeInterrupted: lambda a, e: a.on_interrupted(
        e.seq, e.episode_id, e.completion_tokens, e.reason
    ),
    EpisodeResumed: lambda a, e: a.on_continued(e.seq, e.episode_id, e.policy_version),
    RunResumed: lambda a, e: a.on_resumed(e.seq, e.episode_ids, e.version),
    LimitSet: lambda a, e: a.on_limit_set(e.max_inflight),
    RunFinished: lambda a, e: a.on_run_finished(e.reason),
}
