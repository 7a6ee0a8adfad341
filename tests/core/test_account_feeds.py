"""The account feeds each check only where the run uses its rule (`core.account.checks`):
a check a run does not use is fed no event of a valid log, so its books stay as they began;
a check the run uses is at its points of the flow."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from rolloutlog.core.account import Account
from rolloutlog.core.account.checks import POINTS, Checks
from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Event
from rolloutlog.testing.strategies import run_configs, world_logs

# A run under none of the field's rules: only the no-stale-in-flight check is used.
PLAIN = run_configs(
    weight_update="freeze",
    recycle=False,
    update_pause="none",
    stale_tokens="drop",
    requeue="none",
    stale_member="cancel",
    leftovers="run-on",
    queue_limit=0,
    group_redundancy=0,
    ship_wait="none",
    admission="none",
)


def _untouched(checks: Checks) -> dict[str, Any]:
    """The books of every check a plain run does not use, as they began."""
    return {
        "requeue": (checks.requeue.tasks, checks.requeue.owed),
        "leftovers": (checks.leftovers.opened_at, checks.leftovers.queued_at),
        "partial": (checks.partial.segments, checks.partial.spans),
        "tokens": checks.tokens.generated,
        "mask": checks.mask.pieces,
        "capacity": (checks.capacity.promised, checks.capacity.inflight),
        "outstanding": checks.outstanding.unpublished,
        "max_lag": (checks.max_lag.opened_train, checks.max_lag.updates),
        "areal": checks.areal.accepted,
        "roll": (checks.roll.used_groups, checks.roll.lost),
        "budget": (checks.budget.queued, checks.budget.unpublished),
        "eviction": checks.eviction.evicting,
        "withhold": checks.withhold.owed,
        "redundancy": checks.redundancy.due,
        "ship_wait": checks.ship_wait.since,
    }


@given(world_logs(PLAIN))
def test_a_plain_run_feeds_no_rule_check(log: list[Event]) -> None:
    config = RunConfig.from_mapping(log[0].config)  # type: ignore[attr-defined]
    account = Account(config)
    before = repr(_untouched(account.checks))
    fed = {point: getattr(account.checks, point) for point in POINTS}
    for event in log:
        account.feed(event)
    assert repr(_untouched(account.checks)) == before
    assert {point: methods for point, methods in fed.items() if methods} in (
        {},
        {"update_settled": (account.checks.in_flight.update_settled,)},
    )


RULES = [
    ({"requeue": "at-completion"}, "requeue", "opened"),
    ({"leftovers": "abort"}, "leftovers", "settled"),
    ({"weight_update": "interrupt"}, "partial", "arriving"),
    ({"weight_update": "drain"}, "partial", "dispatching"),
    ({"recycle": True}, "tokens", "shipping"),
    ({"stale_tokens": "mask"}, "mask", "dropped"),
    ({"admission": "capacity"}, "capacity", "admitted"),
    ({"admission": "outstanding"}, "outstanding", "opening"),
    ({"admission": "max-lag"}, "max_lag", "opening"),
    ({"admission": "roll"}, "roll", "opening"),
    ({"admission": "areal"}, "areal", "finalized"),
    ({"admission": "verl"}, "budget", "opened"),
    ({"queue_limit": 8}, "eviction", "room"),
    ({"stale_member": "withhold"}, "withhold", "scored"),
    ({"group_redundancy": 1}, "redundancy", "arrived"),
    ({"ship_wait": "last-chance", "admission": "outstanding"}, "ship_wait", "ships"),
    ({"update_pause": "until-live"}, "update_pause", "admitted"),
]


@pytest.mark.parametrize(("keys", "check", "point"), RULES)
def test_a_run_under_a_rule_feeds_its_check(keys: dict[str, Any], check: str, point: str) -> None:
    checks = Account(RunConfig.from_mapping({"batch_size": 4, **keys})).checks
    owners = {method.__self__ for method in getattr(checks, point)}  # type: ignore[attr-defined]
    assert getattr(checks, check) in owners
    plain = Account(RunConfig.from_mapping({"batch_size": 4})).checks
    assert not any(getattr(plain, check) is m.__self__ for m in getattr(plain, point))  # type: ignore[attr-defined]
