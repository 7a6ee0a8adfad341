"""The tinker-822 preset (tinker-cookbook PR #822): at most `B × (target_lag + 1)` train
groups outstanding, a full batch that waits for work at its last chance, stalest first,
nothing discarded."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import preset_overrides
from rolloutlog.core.rules import shipping
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import BatchShipped, GroupOpened, RunStarted
from tests.core.requeue_runs import TINKER_REQUEUE
from tests.core.test_scenarios import Run

# G = 2, batches of one group, bound 1, lag 1: two groups may be outstanding.
SMALL: dict[str, Any] = {
    "group_size": 2,
    "max_inflight": 8,
    "batch_size": 2,
    "max_off_policy_steps": 1,
    "target_lag": 1,
}


def _run(policy: str = "tinker-822", **config: Any) -> Run:
    return Run(**{**SMALL, **preset_overrides(policy), **config})


def _opened(run: Run) -> list[str]:
    return [e.group_id for e in run.log if isinstance(e, GroupOpened)]


def _batches(run: Run) -> list[tuple[str, ...]]:
    return [e.episode_ids for e in run.log if isinstance(e, BatchShipped)]


def _straggling_g2(run: Run) -> None:
    """g1 ships batch 1; v1 releases it and g3 opens; g3 fills batch 2 while g2 (v0) is
    still out, at its last chance for batch 2 (age 1 = the bound)."""
    run.complete("g1/0", "g1/1")
    run.publish(1)
    run.complete("g3/0", "g3/1")


def test_a_shipped_batch_stays_outstanding_until_its_version_is_announced() -> None:
    run = _run()
    assert _opened(run) == ["g1", "g2"]  # the cap: 1 group per batch x (lag 1 + 1)
    run.complete("g1/0", "g1/1")
    assert _batches(run) == [("g1/0", "g1/1")]
    assert _opened(run) == ["g1", "g2"]  # g1 shipped, but v1 is not announced yet
    run.publish(1)
    assert _opened(run) == ["g1", "g2", "g3"]


def test_a_full_batch_waits_for_the_group_at_its_last_chance_and_trains_it_first() -> None:
    run = _run()
    _straggling_g2(run)
    assert _batches(run) == [("g1/0", "g1/1")]  # batch 2 is full (g3) but waits for g2
    run.complete("g2/0")
    assert len(_batches(run)) == 1
    run.complete("g2/1")  # g2 finalizes: batch 2 ships, stalest first
    assert _batches(run) == [("g1/0", "g1/1"), ("g2/0", "g2/1")]
    summary = run.loop.observers[0].summary()
    assert (summary["ship_waits"], summary["ship_wait_seconds"]) == (1, 2.0)
    assert summary["episodes_dropped_stale"] == 0


def test_mains_tinker_rule_requeues_the_straggler_instead() -> None:
    run = _run("tinker", **TINKER_REQUEUE)  # its requeue rule; its workers run one group here
    _straggling_g2(run)
    assert _batches(run) == [("g1/0", "g1/1"), ("g3/0", "g3/1")]
    assert "ship_waits" not in run.loop.observers[0].summary()


def test_the_account_reports_a_batch_that_ships_past_the_wait() -> None:
    """A sink planted to ship at once: the account's own watch reports batch 2 at its seq."""
    run = _run()
    state = run.loop.state
    state.rules = attrs.evolve(state.rules, ship_waits=shipping.ship_at_once)
    run.complete("g1/0", "g1/1")
    run.publish(1)
    with pytest.raises(
        InvariantViolation,
        match=r"^seq \d+ \(batch_shipped\): batch 2 ships while g2 is at its last chance",
    ):
        run.complete("g3/0", "g3/1")


def test_the_account_reports_a_group_opened_past_the_outstanding_cap() -> None:
    """A dispatcher planted without the cap opens g3 at once: the account counts g1, g2."""
    config = RunConfig.from_mapping({**SMALL, **preset_overrides("tinker-822")})
    loop = ReactionLoop(config, observers=(Account(config),))
    state = loop.state
    state.rules = attrs.evolve(state.rules, allowance=None)
    started = RunStarted(
        t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    with pytest.raises(InvariantViolation, match="outstanding: 2 groups of 2"):
        loop.feed(started)
