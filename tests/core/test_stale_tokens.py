"""`stale_tokens = mask` (docs/contract.md, "Weight updates and work in flight"): an episode
is dropped as stale only when its last segment (`end`) is past the bound; its earlier
segments past it train masked, counted in `batch_shipped.masked_tokens`; the stale
cancellation before an update reads the version the episode would go on under. The account
checks each of these with its own books, so a decider planted with the `drop` rule's
choice in one place is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from rolloutlog.core import presets
from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodesCancelled,
    Event,
    RunStarted,
    VersionPending,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog, open_log
from rolloutlog.replay.step_metrics import MASKED, StepMetrics
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.testing.reference import reference_log
from tests.runtime.sim.sim_helpers import run_collect, write_and_read

MASK = {
    "world.task_length_tokens": 512,
    "run.weight_update": "interrupt",
    "run.stale_tokens": "mask",
}


def _run(seed: int = 2, **keys: Any) -> list[Event]:
    scenario = load_scenario("smoke", {**MASK, **keys})
    events, _ = run_collect(attrs.evolve(scenario, steps=8).with_seed(seed))
    return events


def test_a_masking_run_masks_old_segments_and_every_checker_accepts_it() -> None:
    events = _run()
    batches = [e for e in events if isinstance(e, BatchShipped)]
    masked = sum(b.masked_tokens for b in batches)
    assert masked > 0
    replay = replay_log(MemoryLog(events))
    summary = replay.summary
    assert replay.error is None and summary["invariant_violations"] == []
    assert summary["tokens_trained_masked"] == masked
    assert summary["tokens_trained_gradient"] == sum(b.tokens for b in batches) - masked
    assert verify_log(MemoryLog(events)).divergence is None
    assert reference_log(events) == events
    metrics = StepMetrics()
    for event in events:
        metrics.observe(event)
    assert metrics.run_values()[MASKED] == masked


def test_under_drop_nothing_is_masked_and_the_split_is_not_reported() -> None:
    events = _run(**{"run.stale_tokens": "drop"})
    assert all(e.masked_tokens == 0 for e in events if isinstance(e, BatchShipped))
    assert "tokens_trained_masked" not in replay_log(MemoryLog(events)).summary


@pytest.mark.parametrize(
    ("rule", "planted", "keys", "words"),
    [
        ("masked", None, {}, "its segments past the bound hold"),
        ("stale_view", None, {}, "dropped as stale, but its end"),
        (
            "goes_on_under",
            None,
            {"run.weight_update": "freeze", "run.recycle": True},
            "within the bound: not stale under mask",
        ),
    ],
)
def test_the_account_catches_a_decider_that_keeps_the_drop_rule_in_one_place(
    monkeypatch: pytest.MonkeyPatch, rule: str, planted: object, keys: dict[str, Any], words: str
) -> None:
    monkeypatch.setitem(presets.CHOICES["stale_tokens"]["mask"], rule, planted)
    with pytest.raises(InvariantViolation, match=words):
        for seed in range(4):
            _run(seed, **keys)


def test_replay_of_a_log_file_checks_what_a_masking_run_masks(tmp_path: Path) -> None:
    """Soft staleness drops nothing, so under `mask` a stale uninterrupted episode trains
    all masked; a log file that records those batches as masking nothing is caught by
    `replay` (which reads such a log on the plain path, where the account has the
    arrivals' segments)."""
    scenario = load_scenario("smoke", {"run.staleness": "soft", "run.stale_tokens": "mask"})
    events, _ = run_collect(attrs.evolve(scenario, steps=8))
    assert any(isinstance(e, BatchShipped) and e.masked_tokens for e in events)
    planted = [
        attrs.evolve(e, masked_tokens=0) if isinstance(e, BatchShipped) else e for e in events
    ]
    write_and_read(planted, tmp_path / "planted.arrow")
    replay = replay_log(open_log(tmp_path / "planted.arrow"))
    assert any("its segments past the bound hold" in v for v in replay.violations)


def test_a_per_group_run_cancels_a_stale_group_whole_under_mask() -> None:
    """Found by the ci profile: prime-rl's open-group rule (`stale_cancel = "open"`) cancels
    a per-group group whole at `version_pending` when its unscheduled members would go out at
    its stale stamp, taking the in-flight member that would go on fresh under the announced
    version with it. The account read that member alone and called it "not stale under mask"."""
    config = RunConfig(
        group_size=2,
        max_inflight=1,
        batch_size=None,
        token_batch_size=16,
        max_off_policy_steps=0,
        target_lag=0,
        staleness="per-group",
        stale_cancel="open",
        weight_update="interrupt",
        stale_tokens="mask",
    )
    loop = ReactionLoop(config, observers=(Account(config),))
    started = RunStarted(
        t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    log = loop.feed(started)
    for t, episode_id, tokens in ((3.0, "g1/0", 17), (8.25, "g1/1", 20)):
        log += loop.feed(
            EpisodeCompleted(
                t=t, episode_id=episode_id, reward=t / 10, prompt_tokens=8, completion_tokens=tokens
            )
        )
    log += loop.feed(VersionPending(t=8.25, version=1))
    cancelled = [e for e in log if isinstance(e, EpisodesCancelled)]
    assert [(c.group_id, c.episode_ids, c.unscheduled) for c in cancelled] == [("g2", ("g2/0",), 1)]
