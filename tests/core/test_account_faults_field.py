"""The account's reports on the field presets' mechanisms (requeue, ship wait and the
outstanding cap, verl's budget, AReaL's and ROLL's admission, bounded-queue eviction,
withholding), each set off by one planted fault at its own seq, as in
`test_account_faults.py`; the plants' harness is `tests/core/planted_faults.py`.
"""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.account.groups import age, behind
from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
)
from tests.core.field_plants import drop as _drop
from tests.core.field_plants import drop_oldest as _drop_oldest
from tests.core.field_plants import queued_age as _queued_age
from tests.core.field_plants import worlds as _worlds
from tests.core.planted_faults import Plant, Planted, check_reported

# --- requeue (core.account.requeue) ---------------------------------------------------


def _requeue_skipped(account: Account, event: Event) -> Planted | None:
    """A fresh task opened while a requeued one is owed."""
    if not (
        isinstance(event, GroupOpened) and event.work == "train" and account.checks.requeue.owed
    ):
        return None
    due = next(iter(account.checks.requeue.owed))
    wrong = attrs.evolve(event, task_id="t99999")
    owed = ", ".join(account.checks.requeue.tasks[due])
    return [wrong], f"skips the requeue of {due} ({owed}): opened {('t99999', event.env)}"


def _requeue_against_the_rule(queued: bool) -> Plant:
    """A stale drop (from the queue, or of an arrival) recorded as a requeue."""
    where = "from the queue" if queued else "at completion"

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeDropped) or event.reason != "stale":
            return None
        if (event.episode_id in account.queue) != queued:
            return None
        rule = account.checks.requeue.rule
        return [
            attrs.evolve(event, reason="requeue")
        ], f"requeue {where} under requeue rule {rule!r}"

    return plant


def _requeue_keeps_an_arrival(account: Account, event: Event) -> Planted | None:
    """A group's first requeue drop of an arrival, then its scoring with the rest kept."""
    if not isinstance(event, EpisodeDropped) or event.reason != "requeue":
        return None
    group_id = event.episode_id.rpartition("/")[0]
    group = account.groups.get(group_id)
    if group is None or group.owes or group.dropped:
        return None
    kept = sorted(set(group.arrived) - {event.episode_id})
    if not kept or len(group.arrived) + group.cancelled != account.members(group):
        return None
    scored = GroupScored(
        t=event.t, group_id=group_id, episode_ids=(), advantages=(), admitted=False
    )
    return [event, scored], f"requeue of {group_id} keeps {kept}"


# --- ship wait and outstanding admission (core.account.ship_wait) -----------------------


def _outstanding_cap(account: Account) -> tuple[int, int]:
    """The outstanding train groups as the account counts them, and the cap."""
    open_train = {g for g, group in account.groups.items() if group.train}
    queued = {e.rpartition("/")[0] for e in account.queue}
    shipped = set().union(
        *(g for s, g in account.checks.outstanding.unpublished.items() if s > account.version)
    )
    config = account.config
    cap = max(1, (config.batch_size or 0) // config.group_size) * (config.target_lag + 1)
    return len(open_train | queued | shipped), cap


def _train_groups_opened(account: Account, event: Event, count: int) -> list[Event]:
    """`count` train groups opened at `event`'s time, numbered on from the last."""
    number = len(account.registry.members)
    return [
        GroupOpened(
            t=event.t,
            group_id=f"g{number + i}",
            work="train",
            env="main",
            task_id="t1",
            group_size=account.group_size,
            policy_version=account.version,
            step=account.step,
            frozen=False,
        )
        for i in range(count)
    ]


def _while_a_train_group_is_open(account: Account) -> bool:
    return not account.finished and any(group.train for group in account.groups.values())


def _opened_past_the_cap(account: Account, event: Event) -> Planted | None:
    """While a train group is open, train groups opened until the last finds the cap
    reached exactly (the boundary: the ones before it are allowed)."""
    if not _while_a_train_group_is_open(account):
        return None
    outstanding, cap = _outstanding_cap(account)
    if outstanding > cap:
        return None
    opened = _train_groups_opened(account, event, cap - outstanding + 1)
    return opened, f"outstanding: {cap} groups of {cap}"


def _at_its_last_chance(account: Account) -> str | None:
    """An open live train group with a member at age >= the bound at this step (the
    test's own reading, so that a mutant of the account's does not move the plant)."""
    for group_id, group in account.groups.items():
        versions = [v for v, _ in group.inflight.values()]
        versions += [v for _, v, _, _ in group.arrived.values()]
        live = group.train and not group.frozen
        if live and any(age(v, account.step) >= account.bound for v in versions):
            return group_id
    return None


def _ships_at_a_last_chance(account: Account, event: Event) -> Planted | None:
    """A full batch ships, the hold lifted, while a group is at its last chance."""
    size = account.config.batch_size or 0
    if account.gated or account.finished or len(account.queue) < size:
        return None
    group_id = _at_its_last_chance(account)
    if group_id is None:
        return None
    ids = tuple(account.queue)[:size]
    tokens = sum(account.queue[e][2] for e in ids)
    shipped = BatchShipped(
        t=event.t, step=account.step, episode_ids=ids, trained_ids=ids, tokens=tokens
    )
    problem = f"batch {account.step} ships while {group_id} is at its last chance"
    return [shipped], problem + " (ship_wait = last-chance)"


# --- verl's sample budget (core.account.budget) ----------------------------------------


def _groups_per_batch(config: RunConfig) -> int:
    """`max(1, ⌊batch_size / G⌋)`: verl's, AReaL's and ROLL's rules count in whole groups
    (the test's own arithmetic)."""
    return max(1, (config.batch_size or 0) // config.group_size)


def _verl_budget(config: RunConfig) -> int:
    """verl's episodes per sync window, `⌊B / G⌋ × (1 + θ) × K` groups of G (the test's own
    arithmetic)."""
    groups = int(
        _groups_per_batch(config) * (1 + config.staleness_threshold) * config.updates_per_sync
    )
    return groups * config.group_size


def _opened_past_the_budget(account: Account, event: Event) -> Planted | None:
    """While a train group is open, train groups opened (G episodes each) until the last
    finds the sync window's count at the budget or past it (the ones before it are
    allowed)."""
    if not _while_a_train_group_is_open(account):
        return None
    budget, size = _verl_budget(account.config), account.config.group_size
    counted = account.checks.budget.counted()
    room = max(0, -(-(budget - counted) // size))  # groups that still fit
    opened = _train_groups_opened(account, event, room + 1)
    problem = f"{counted + room * size} episodes counted this sync window, of {budget}"
    return opened, f"verl admission: {problem}"


def _opened_past_the_max_lag(account: Account, event: Event) -> Planted | None:
    """While a train group is open, train groups opened until the last finds PipelineRL's
    allowance `⌈max_lag / G⌉ + ⌈B / G⌉ × (updates + 1)` reached exactly (the test's own
    arithmetic; the ones before it are allowed)."""
    if not _while_a_train_group_is_open(account):
        return None
    config, size = account.config, account.config.group_size
    per_update = math.ceil((config.batch_size or 0) / size)
    allowed = math.ceil(config.max_lag / size) + per_update * (account.checks.max_lag.updates + 1)
    if account.checks.max_lag.opened_train > allowed:
        return None
    opened = _train_groups_opened(account, event, allowed - account.checks.max_lag.opened_train + 1)
    return opened, f"max-lag admission: train group {allowed + 1} opened, {allowed} allowed"


def _opened_alone_past_the_budget(account: Account, event: Event) -> Planted | None:
    """No train group open and no sync coming, but a full batch queued: a train group
    opened at a spent budget is reported even though it would be the only one open."""
    config = account.config
    if account.finished or any(group.train for group in account.groups.values()):
        return None
    k = config.updates_per_sync
    if (account.shipped() // k) * k > account.version or len(account.queue) < (
        config.batch_size or 0
    ):
        return None
    budget, counted = _verl_budget(config), account.checks.budget.counted()
    if counted < budget:
        return None
    problem = f"{counted} episodes counted this sync window, of {budget}"
    return _train_groups_opened(account, event, 1), f"verl admission: {problem}"


# --- AReaL's capacity and ROLL's budget (core.account.admission) -----------------------


def _opened_past_areal_capacity(account: Account, event: Event) -> Planted | None:
    """While a train group is open, train groups opened until the last finds AReaL's
    capacity `min(max_inflight − running, (η + v + 1) × B − (accepted + running))` at zero
    (the ones before it are allowed)."""
    if not _while_a_train_group_is_open(account):
        return None
    config = account.config
    running = sum(group.train for group in account.groups.values())
    accepted = account.checks.areal.accepted // config.group_size
    horizon = (config.max_off_policy_steps + account.version + 1) * _groups_per_batch(config)
    room = min(config.max_inflight - running, horizon - accepted - running)
    if room < 0:
        return None
    opened = _train_groups_opened(account, event, room + 1)
    problem = f"{accepted} accepted + {running + room} running groups of {horizon}"
    return opened, f"areal admission: {problem}"


def _opened_past_roll_budget(account: Account, event: Event) -> Planted | None:
    """While a train group is open, train groups opened until the last finds ROLL's budget
    `⌈α·B⌉ + (v + 1)·B` of groups begun and not aborted spent exactly."""
    if not _while_a_train_group_is_open(account):
        return None
    config, roll = account.config, account.checks.roll
    used = roll.used_groups - roll.lost // config.group_size
    per_batch = _groups_per_batch(config)
    budget = (
        math.ceil(config.async_generation_ratio * per_batch) + (account.version + 1) * per_batch
    )
    if used > budget:
        return None
    opened = _train_groups_opened(account, event, budget - used + 1)
    return opened, f"roll admission: {budget} groups begun and not aborted, budget {budget}"


# --- bounded-queue eviction (core.account.eviction) ------------------------------------


def _evicts_from_an_unbounded_queue(account: Account, event: Event) -> Planted | None:
    if not account.queue:
        return None
    oldest, drop = _drop_oldest(account, event, "evicted")
    return [drop], f"evicts {oldest} from an unbounded queue"


def _evicts_not_the_oldest(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDropped) or event.reason != "evicted" or len(account.queue) < 2:
        return None
    oldest, second = tuple(account.queue)[:2]
    drop = _drop(event, second, "evicted", _queued_age(account, second))
    return [drop], f"evicts {second}, but the oldest queued is {oldest}"


def _evicts_at_a_wrong_age(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeDropped) or event.reason != "evicted":
        return None
    actual = _queued_age(account, event.episode_id)
    wrong = attrs.evolve(event, age=actual + 1)
    return [wrong], f"recorded age {actual + 1}, actual age {actual}"


def _incoming(account: Account, event: GroupScored) -> int:
    group = account.groups.get(event.group_id)
    return len(event.episode_ids) if event.admitted and group is not None and group.train else 0


def _evicts_with_room(account: Account, event: Event) -> Planted | None:
    """The oldest evicted before a scoring that leaves the queue exactly full (the boundary)."""
    if not isinstance(event, GroupScored) or account.checks.eviction.evicting or not account.queue:
        return None
    held = len(account.queue)
    if held + _incoming(account, event) != account.checks.eviction.limit:
        return None
    _, drop = _drop_oldest(account, event, "evicted")
    return [drop, event], f"evicted 1 from a queue of {held} with room"


def _evicts_one_too_many(account: Account, event: Event) -> Planted | None:
    """One more of the oldest evicted right before a scoring that needed evictions."""
    if (
        not isinstance(event, GroupScored)
        or not account.checks.eviction.evicting
        or not account.queue
    ):
        return None
    held, evicted, limit = (
        len(account.queue),
        len(account.checks.eviction.evicting),
        account.checks.eviction.limit,
    )
    needed = held + evicted + _incoming(account, event) - limit
    _, drop = _drop_oldest(account, event, "evicted")
    return [drop, event], f"evicted {evicted + 1}, {needed} needed"


def _evicts_a_whole_group_too_many(account: Account, event: Event) -> Planted | None:
    """Under oldest-group, the next oldest group evicted too, right before the scoring."""
    if (
        not isinstance(event, GroupScored)
        or not account.checks.eviction.evicting
        or not account.queue
    ):
        return None
    group_id = next(iter(account.queue)).rpartition("/")[0]
    members = [e for e in account.queue if e.rpartition("/")[0] == group_id]
    drops = [_drop(event, e, "evicted", _queued_age(account, e)) for e in members]
    return [*drops, event], f"evicts group {group_id} it had room for"


# --- withholding (core.account.withhold) -----------------------------------------------


def _withholding_skipped(account: Account, event: Event) -> Planted | None:
    """A scoring where a `withheld` drop is owed (of a group never opened)."""
    if not account.checks.withhold.owed or not isinstance(event, EpisodeDropped):
        return None
    owed = sorted(account.checks.withhold.owed)[:5]
    scored = GroupScored(t=event.t, group_id="g9999", episode_ids=(), advantages=(), admitted=False)
    return [scored], f"stale members scored but not withheld: {owed}"


def _withheld_but_fresh(account: Account, event: Event) -> Planted | None:
    """Right after an admitted scoring, a fresh member of it withheld."""
    if not (isinstance(event, GroupScored) and event.admitted and event.episode_ids):
        return None
    group = account.groups[event.group_id]
    if not group.train:
        return None
    fresh = [
        e
        for e in event.episode_ids
        if behind(group.arrived[e][1], account.version) <= account.bound
    ]
    if not fresh:
        return None
    version = group.arrived[fresh[0]][1]
    drop = _drop(event, fresh[0], "withheld", age(version, account.step))
    return [event, drop], f"{fresh[0]} withheld, but not a scored stale member"


def _stale_dropped_before_scoring(account: Account, event: Event) -> Planted | None:
    """A train arrival past the bound by version, dropped at once instead of scored."""
    if not isinstance(event, EpisodeCompleted) or event.episode_id not in account.inflight:
        return None
    group = account.inflight[event.episode_id]
    version, _ = group.inflight[event.episode_id]
    if not group.train or group.frozen or behind(version, account.version) <= account.bound:
        return None
    drop = _drop(event, event.episode_id, "stale", age(version, account.step))
    return [event, drop], f"{event.episode_id} dropped before scoring, not withheld"


def _cancelled_for_its_age(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodesCancelled) or event.reason == "stale":
        return None
    member = account.config.stale_member
    return [attrs.evolve(event, reason="stale")], f"stale cancellation under stale_member={member}"


# Each fault's worlds: `test_plant_points.py` checks that they offer points to plant it.
WORLDS: dict[str, st.SearchStrategy[list[Event]]] = {}

FAULTS: dict[str, tuple[str, Plant]] = {
    "requeue skipped": ("group_opened", _requeue_skipped),
    "requeue from the queue at completion": ("episode_dropped", _requeue_against_the_rule(True)),
    "requeue without a rule": ("episode_dropped", _requeue_against_the_rule(False)),
    "requeue keeps an arrival": ("group_scored", _requeue_keeps_an_arrival),
    "opened past the outstanding cap": ("group_opened", _opened_past_the_cap),
    "opened past the outstanding cap under liveness": ("group_opened", _opened_past_the_cap),
    "ships at a last chance": ("batch_shipped", _ships_at_a_last_chance),
    "ships at a last chance behind eval and frozen groups": (
        "batch_shipped",
        _ships_at_a_last_chance,
    ),
    "opened past verl's budget": ("group_opened", _opened_past_the_budget),
    "opened alone past verl's budget": ("group_opened", _opened_alone_past_the_budget),
    "opened past the max-lag allowance": ("group_opened", _opened_past_the_max_lag),
    "opened past AReaL's capacity": ("group_opened", _opened_past_areal_capacity),
    "opened past ROLL's budget": ("group_opened", _opened_past_roll_budget),
    "evicts from an unbounded queue": ("episode_dropped", _evicts_from_an_unbounded_queue),
    "evicts not the oldest": ("episode_dropped", _evicts_not_the_oldest),
    "evicts at a wrong age": ("episode_dropped", _evicts_at_a_wrong_age),
    "evicts with room": ("group_scored", _evicts_with_room),
    "evicts one too many": ("group_scored", _evicts_one_too_many),
    "evicts a whole group too many": ("group_scored", _evicts_a_whole_group_too_many),
    "withholding skipped": ("group_scored", _withholding_skipped),
    "withheld but fresh": ("episode_dropped", _withheld_but_fresh),
    "stale dropped before scoring": ("episode_dropped", _stale_dropped_before_scoring),
    "cancelled for its age under withhold": ("episodes_cancelled", _cancelled_for_its_age),
    "cancelled for its age under run-on": ("episodes_cancelled", _cancelled_for_its_age),
}
WORLDS.update(
    {
        "requeue skipped": _worlds("tinker", requeue_order="first"),
        "requeue from the queue at completion": _worlds("slime-lag"),
        "requeue without a rule": _worlds("tinker", requeue="none"),
        "requeue keeps an arrival": _worlds("slime-lag"),
        "opened past the outstanding cap": _worlds("tinker-822"),
        # the liveness exception lets a group open only with none open: here one is
        "opened past the outstanding cap under liveness": _worlds("tinker-822", liveness=True),
        # a depth of one batch past the first: a group may run beside a full queued batch
        # (at depth 0 a full queue is the whole cap, and no group is open when it ships)
        "ships at a last chance": _worlds("tinker-822", outstanding_depth=1),
        # the account looks past eval and frozen groups for a last chance
        "ships at a last chance behind eval and frozen groups": _worlds(
            "tinker-822", outstanding_depth=1, eval_interval=1, frozen_fraction=0.5
        ),
        "opened past verl's budget": _worlds("verl-fully-async"),
        # two updates per sync: a window spent with no sync coming, and nothing open
        "opened alone past verl's budget": _worlds("verl-fully-async", updates_per_sync=2),
        # a lag of 5 over groups of 3: ⌈5/3⌉ is 2 where 5/3 is not a whole number
        "opened past the max-lag allowance": _worlds("per-episode", admission="max-lag", max_lag=5),
        # batches of parts of groups (5 over groups of 3): ⌊5/3⌋ is 1 where 5/3 is not
        "opened past AReaL's capacity": _worlds("areal", batch_size=5, liveness=True),
        "opened past ROLL's budget": _worlds("roll-flash", batch_size=5, liveness=True),
        "evicts from an unbounded queue": _worlds("tinker-822"),
        "evicts not the oldest": _worlds("pipelinerl", queue_limit=4),
        "evicts at a wrong age": _worlds("pipelinerl", queue_limit=4),
        "evicts with room": _worlds("pipelinerl", queue_limit=4),
        "evicts one too many": _worlds("pipelinerl", queue_limit=4),
        "evicts a whole group too many": _worlds(
            "pipelinerl", queue_limit=5, queue_eviction="oldest-group"
        ),
        "withholding skipped": _worlds("prime-rl-withhold"),
        "withheld but fresh": _worlds("prime-rl-withhold"),
        "stale dropped before scoring": _worlds("prime-rl-withhold"),
        "cancelled for its age under withhold": _worlds("prime-rl-withhold"),
        "cancelled for its age under run-on": _worlds("verl-drop"),
    }
)
# What each decider alone says of a fault it refuses (as in `planted_faults.REFUSALS`).
REFUSALS: dict[tuple[str, str], str] = {
    ("requeue skipped", "dispatcher"): (
        r"the requeue of G \(t\d+, \w+\) is due before a fresh task, got \(t99999, \w+\)"
    ),
    ("withholding skipped", "sink"): "G is not open",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@given(data=st.data())
def test_each_report_names_its_planted_fault(fault: str, data: st.DataObject) -> None:
    kind, plant = FAULTS[fault]
    log = data.draw(WORLDS[fault], label="log")
    check_reported(fault, kind, plant, log, REFUSALS)
