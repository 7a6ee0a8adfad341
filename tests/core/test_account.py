"""The shadow account is independent of the core: bugs planted in the core's arithmetic or
rules are caught by its own, and its newer properties (stamping, the ship hold, the dispatch
gate) flag exactly the events that break them."""

from __future__ import annotations

import random

import attrs
import pytest

from rolloutlog.core import dispatcher_fill, sink, staleness
from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    Event,
    GroupOpened,
    GroupScored,
    RunStarted,
    VersionPending,
)
from rolloutlog.testing.scripted_world import scripted_log
from tests.core.core_events import dispatched, opened

CONFIG = RunConfig.from_mapping(
    {"group_size": 4, "max_inflight": 8, "batch_size": 4, "max_off_policy_steps": 1}
)


def _run_checked(config: RunConfig, seeds: range, steps: int = 300) -> list[str]:
    """Scripted runs with the raising account observing the loop; what it flagged, per seed."""
    flagged = []
    for seed in seeds:
        loop = ReactionLoop(config, observers=(Account(config),))
        try:
            scripted_log(config, random.Random(seed).randrange, steps, loop=loop)
        except InvariantViolation as violation:
            flagged.append(str(violation))
    return flagged


def test_the_unmutated_core_passes_the_account() -> None:
    """The control for the mutants below: the same runs, nothing flagged."""
    assert _run_checked(CONFIG, range(20)) == []


def test_an_off_by_one_rollout_age_in_the_core_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted bug in `core.staleness.rollout_age` (ages one version too young): the
    deciders keep and ship episodes past the bound, and the account, which computes ages
    itself, flags it."""

    def young(start_version: int, step: int) -> int:
        return (step - 1) - start_version - 1

    for module in (staleness, sink):  # the rule families read it through `is_stale`
        monkeypatch.setattr(module, "rollout_age", young)
    flagged = _run_checked(CONFIG, range(20))
    assert flagged, "the account missed a rollout_age that is off by one"
    assert any("age" in problem or "stale" in problem for problem in flagged), flagged


def test_an_open_gate_in_the_core_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted bug in the dispatcher's gate (never closes): train dispatch while the
    trainer lags more than `target_lag`."""
    monkeypatch.setattr(dispatcher_fill, "gated", lambda rules, state: False)
    config = RunConfig.from_mapping({**CONFIG.to_dict(), "target_lag": 0})
    flagged = _run_checked(config, range(20))
    assert any("lags" in problem for problem in flagged), flagged


# --- the properties on hand-made event streams ---------------------------------------------


def _account(config: RunConfig, events: list[Event]) -> Account:
    account = Account(config, raise_on_violation=False)
    for seq, event in enumerate(events):
        account.feed(attrs.evolve(event, seq=seq))
    return account


def _opened(group_id: str, version: int = 0, step: int = 1) -> GroupOpened:
    return opened(group_id, version, step, size=1)


def _done(episode_id: str) -> list[Event]:
    return [
        EpisodeCompleted(
            t=0.0, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
        ),
        GroupScored(
            t=0.0,
            group_id=episode_id.partition("/")[0],
            episode_ids=(episode_id,),
            advantages=(0.0,),
            admitted=True,
        ),
    ]


CONFIG_1 = RunConfig.from_mapping(
    {
        "group_size": 1,
        "max_inflight": 4,
        "batch_size": 1,
        "max_off_policy_steps": 2,
        "target_lag": 0,
    }
)
START = RunStarted(
    t=0.0, config=CONFIG_1.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
)


def _ship(step: int, episode_id: str) -> BatchShipped:
    ids = (episode_id,)
    return BatchShipped(t=0.0, step=step, episode_ids=ids, trained_ids=ids, tokens=2)


def test_stamping_flags_a_dispatch_stamped_with_another_version() -> None:
    events = [START, VersionPending(t=0.0, version=1), _opened("g1", 1), dispatched("g1/0", 0)]
    early, problem = _account(CONFIG_1, events).violations  # v1 before its batch, too
    assert early.startswith("seq 1 (version_pending): v1 after v0 with 0 batches shipped")
    assert problem.startswith("seq 3 (episode_dispatched): stamped v0")


def test_per_group_stamping_is_the_groups_start_version() -> None:
    config = RunConfig.from_mapping({**CONFIG_1.to_dict(), "staleness": "per-group"})
    events = [START, _opened("g1", 0), VersionPending(t=0.0, version=1), dispatched("g1/0", 0)]
    early = "seq 2 (version_pending): v1 after v0 with 0 batches shipped"  # before its batch
    (only,) = _account(config, events).violations
    assert only.startswith(early)
    events[-1] = dispatched("g1/0", 1)
    _, problem = _account(config, events).violations
    assert problem.startswith("seq 3 (episode_dispatched): stamped v1")


def test_the_ship_hold_flags_a_batch_the_trainer_cannot_take_yet() -> None:
    """target_lag 0: batch 2 trains on v1, so it may ship only once v1 is published."""
    first = [START, _opened("g1"), dispatched("g1/0", 0), *_done("g1/0"), _ship(1, "g1/0")]
    second = [_opened("g2", 0, step=2), dispatched("g2/0", 0), *_done("g2/0")]
    held = _account(CONFIG_1, [*first, *second, _ship(2, "g2/0")])
    assert any("before the ship hold" in v for v in held.violations), held.violations
    published = [*first, VersionPending(t=0.0, version=1)]
    second = [_opened("g2", 1, step=2), dispatched("g2/0", 1), *_done("g2/0")]
    assert _account(CONFIG_1, [*published, *second, _ship(2, "g2/0")]).violations == []


def test_the_gate_flags_a_train_dispatch_while_the_trainer_lags() -> None:
    """Step 2 at v0 with target_lag 0: (2 - 1) - 0 = 1 > 0, train dispatch must pause."""
    first = [START, _opened("g1"), dispatched("g1/0", 0), *_done("g1/0"), _ship(1, "g1/0")]
    account = _account(CONFIG_1, [*first, _opened("g2", 0, step=2), dispatched("g2/0", 0)])
    (problem,) = account.violations
    assert problem.startswith("seq 7 (episode_dispatched): train dispatch while the trainer lags")
