"""Interruptions and resumptions recorded: partial rollouts as `weight_update = interrupt`
runs log them, refused in one line where no run could make them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.record import Recorder, RecordError
from tests.record.clean import replay_problems

CONFIG = {"group_size": 2, "batch_size": 2, "weight_update": "interrupt"}


def _spanning_run(path: Path, **config: object) -> None:
    """g1/0 generates 5 tokens under v0 and 7 more under v1; g1/1 finishes under v0."""
    with Recorder(path, config={**CONFIG, **config}, code_version="test") as rec:
        rec.open_group(0.0, "a", env="math", task="t1")
        rec.dispatch(0.0, "a", "e0")
        rec.dispatch(0.0, "a", "e1")
        rec.complete(1.0, "e1", reward=1.0, prompt_tokens=3, completion_tokens=4)
        rec.open_group(1.0, "b", env="math", task="t2")
        rec.dispatch(1.0, "b", "f0")
        rec.dispatch(1.0, "b", "f1")
        rec.complete(1.5, "f0", reward=0.0, prompt_tokens=3, completion_tokens=2)
        rec.complete(1.5, "f1", reward=1.0, prompt_tokens=3, completion_tokens=2)
        rec.score(1.5, "b", {"f0": -0.5, "f1": 0.5}, admitted=True)
        rec.ship(1.5, ["f0", "f1"])
        rec.version_pending(2.0, 1)
        rec.interrupt(2.0, "e0", completion_tokens=5)
        rec.version_live(2.0, 1)
        rec.resume(2.0, "e0", version=1)
        rec.complete(3.0, "e0", reward=0.0, prompt_tokens=3, completion_tokens=12)
        rec.score(3.0, "a", {"e0": -0.5, "e1": 0.5}, admitted=True)
        rec.ship(3.0, ["e0", "e1"])


def test_an_episode_spanning_an_update_is_two_segments_and_replays_clean(tmp_path: Path) -> None:
    _spanning_run(tmp_path / "run.arrow")
    events = read_log(tmp_path / "run.arrow")
    partial = [(e.kind, e.episode_id) for e in events if e.kind.startswith("episode_")]
    assert ("episode_interrupted", "g1/0") in partial
    assert ("episode_resumed", "g1/0") in partial
    interrupted = next(e for e in events if e.kind == "episode_interrupted")
    resumed = next(e for e in events if e.kind == "episode_resumed")
    assert (interrupted.completion_tokens, interrupted.reason) == (5, "update")
    assert resumed.policy_version == 1
    assert replay_problems(tmp_path / "run.arrow") == []


def test_replay_refuses_an_interruption_the_run_rules_do_not_make(tmp_path: Path) -> None:
    _spanning_run(tmp_path / "run.arrow", weight_update="freeze")
    problems = replay_problems(tmp_path / "run.arrow")
    assert problems and all("episode_interrupted" in p for p in problems), problems


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda r: r.interrupt(1.0, "e1", completion_tokens=1),
            "interrupt: episode e1 is not in flight",
        ),
        (lambda r: r.resume(1.0, "e1", version=0), "resume: episode e1 is not in flight"),
        (
            lambda r: r.interrupt(1.0, "e9", completion_tokens=1),
            "interrupt: episode e9 was never dispatched",
        ),
        (
            lambda r: r.interrupt(1.0, "e0", completion_tokens=1, reason="bored"),
            "interrupt: reason must be one of ('update', 'recycle'), got 'bored'",
        ),
        (
            lambda r: r.interrupt(1.0, "e0", completion_tokens=-1),
            "interrupt: completion_tokens must be >= 0, got -1",
        ),
    ],
)
def test_misuse_is_one_line_naming_the_call(tmp_path: Path, call, message: str) -> None:
    with Recorder(tmp_path / "run.arrow", config=CONFIG, code_version="test") as rec:
        rec.open_group(0.0, "a", env="math", task="t1")
        rec.dispatch(0.0, "a", "e0")
        rec.dispatch(0.0, "a", "e1")
        rec.complete(1.0, "e1", reward=1.0, prompt_tokens=3, completion_tokens=4)
        with pytest.raises(RecordError) as caught:
            call(rec)
        assert str(caught.value) == message
    assert replay_problems(tmp_path / "run.arrow") == []
