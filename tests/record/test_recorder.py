"""The recording API: calls in, a log that replays clean out; misuse refused in one line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.record import Recorder, RecordError, read_foreign_ids
from rolloutlog.replay.conformance import check_conformance
from rolloutlog.replay.source import open_log
from tests.record.clean import replay_problems

CONFIG = {"group_size": 2, "batch_size": 2}


def recorder(path: Path, **config: object) -> Recorder:
    path.mkdir(parents=True, exist_ok=True)
    return Recorder(path / "run.arrow", config={**CONFIG, **config}, code_version="test")


def test_an_unfinished_block_is_finished_at_the_last_time(tmp_path: Path) -> None:
    group = uuid.uuid4()
    with recorder(tmp_path) as rec:
        rec.open_group(1.0, group, env="math", task="t1")
        rec.dispatch(2.0, group, "e0")
    events = read_log(tmp_path / "run.arrow")
    assert [(e.kind, e.t) for e in events[-3:]] == [
        ("run_finished", 2.0),
        ("episodes_cancelled", 2.0),
        ("group_scored", 2.0),
    ]
    assert replay_problems(tmp_path / "run.arrow") == []
    assert read_foreign_ids(tmp_path / "run.arrow") == {"g1": str(group), "g1/0": "e0"}


def test_a_block_that_raises_leaves_the_run_unfinished(tmp_path: Path) -> None:
    with pytest.raises(KeyError), recorder(tmp_path) as rec:
        rec.open_group(1.0, "a", env="math", task="t1")
        raise KeyError("the orchestrator crashed")
    assert [e.kind for e in read_log(tmp_path / "run.arrow")] == ["run_started", "group_opened"]


def test_time_going_backwards_is_refused_naming_the_call_and_both_times(tmp_path: Path) -> None:
    with recorder(tmp_path) as rec:
        rec.open_group(1.0, "a", env="math", task="t1")
        rec.dispatch(4.5, "a", "e0")
        with pytest.raises(RecordError) as caught:
            rec.complete(3.0, "e0", reward=1.0, prompt_tokens=1, completion_tokens=1)
        assert (
            str(caught.value) == "complete: t=3.0 is before t=4.5 of the previous call (dispatch)"
        )
    assert replay_problems(tmp_path / "run.arrow") == []  # the refused call wrote nothing


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.dispatch(1.0, "zz", "e9"), "dispatch: group zz was never opened"),
        (
            lambda r: r.complete(1.0, "e9", reward=0.0, prompt_tokens=1, completion_tokens=1),
            "complete: episode e9 was never dispatched",
        ),
        (
            lambda r: r.open_group(1.0, "a", env="m", task="t"),
            "open_group: group a was recorded before",
        ),
        (lambda r: r.dispatch(1.0, "a", "e0"), "dispatch: episode e0 was recorded before"),
        (
            lambda r: (r.dispatch(1.0, "a", "e1"), r.dispatch(1.0, "a", "e2")),
            "dispatch: group a owes no member (G=2)",
        ),
        (
            lambda r: r.cancel(1.0, "a", ["e0"], unscheduled=2, reason="overload"),
            "cancel: 2 unscheduled, group a owes 1",
        ),
        (
            lambda r: r.cancel(1.0, "a", ["e0"], reason="bored"),
            "cancel: reason must be one of ('stale', 'overload', 'straggler', 'shutdown', "
            "'restart', 'leftover', 'redundant'), got 'bored'",
        ),
        (lambda r: r.score(1.0, "a", {}, admitted=False), "score: group a still owes 2 of G=2"),
        (lambda r: r.drop(1.0, "e0"), "drop: episode e0 is neither arrived nor queued"),
        (
            lambda r: r.open_group(1.0, "b", env="m", task="t", work="play"),
            "open_group: work must be one of ('train', 'eval'), got 'play'",
        ),
        (
            lambda r: r.dispatch(1.0, "a", ""),
            "dispatch: episode must be a non-empty string or a uuid, got ''",
        ),
        (
            lambda r: r.finish(1.0) or r.version_pending(2.0, 1),
            "version_pending: the run finished at t=1.0",
        ),
        (lambda r: r.finish(1.0) or r.finish(2.0), "finish: the run finished at t=1.0"),
    ],
)
def test_misuse_is_one_line_naming_the_call(tmp_path: Path, call, message: str) -> None:
    with recorder(tmp_path) as rec:
        rec.open_group(1.0, "a", env="math", task="t1")
        rec.dispatch(1.0, "a", "e0")
        with pytest.raises(RecordError) as caught:
            call(rec)
        assert str(caught.value) == message
    assert replay_problems(tmp_path / "run.arrow") == []


def test_cancelling_an_episode_that_arrived_is_refused(tmp_path: Path) -> None:
    with recorder(tmp_path) as rec:
        rec.open_group(1.0, "a", env="math", task="t1")
        rec.dispatch(1.0, "a", "e0")
        rec.complete(2.0, "e0", reward=1.0, prompt_tokens=1, completion_tokens=1)
        with pytest.raises(RecordError, match=r"^cancel: episode e0 is not in flight in a$"):
            rec.cancel(3.0, "a", ["e0"], reason="overload")
        rec.cancel(3.0, "a", unscheduled=1, reason="overload")
        rec.complete(4.0, "e0", reward=1.0, prompt_tokens=1, completion_tokens=1)  # late
        rec.score(4.0, "a", {"e0": 0.0}, admitted=True)
    assert replay_problems(tmp_path / "run.arrow") == []


def ours(directory: Path, group: str) -> str:
    """Our id of the foreign group `group` in the log under `directory`."""
    return next(k for k, v in read_foreign_ids(directory / "run.arrow").items() if v == group)


def _ship_a_batch(rec: Recorder, t: float) -> None:
    """A group of two that arrives, scores and ships as batch 1."""
    rec.open_group(t, "b", env="math", task="t2")
    for episode, reward in (("b0", 1.0), ("b1", 0.0)):
        rec.dispatch(t, "b", episode)
        rec.complete(t, episode, reward=reward, prompt_tokens=1, completion_tokens=1)
    rec.score(t, "b", {"b0": 0.5, "b1": -0.5}, admitted=True)
    rec.ship(t, ["b0", "b1"])


def test_a_version_out_of_turn_is_refused_naming_the_call(tmp_path: Path) -> None:
    with recorder(tmp_path) as rec:
        with pytest.raises(RecordError, match="version_pending: v1 after v0 with 0 batches"):
            rec.version_pending(1.0, 1)  # before its batch shipped
        _ship_a_batch(rec, 2.0)
        rec.version_pending(3.0, 1)
        with pytest.raises(RecordError, match="version_pending: v1 after v1 with 1 batches"):
            rec.version_pending(4.0, 1)  # announced twice
    assert replay_problems(tmp_path / "run.arrow") == []


def test_each_dispatch_is_stamped_as_the_staleness_policy_says(tmp_path: Path) -> None:
    stamps = {}
    for staleness in ("per-episode", "per-group"):
        with recorder(tmp_path / staleness, staleness=staleness) as rec:
            rec.open_group(1.0, "a", env="math", task="t1")
            rec.dispatch(1.0, "a", "e0")
            _ship_a_batch(rec, 1.5)  # v1 follows its batch
            rec.version_pending(2.0, 1)
            rec.dispatch(3.0, "a", "e1")
        events = read_log(tmp_path / staleness / "run.arrow")
        stamps[staleness] = [
            e.policy_version
            for e in events
            if e.kind == "episode_dispatched" and e.group_id == ours(tmp_path / staleness, "a")
        ]
        assert replay_problems(tmp_path / staleness / "run.arrow") == []
    assert stamps == {"per-episode": [0, 1], "per-group": [0, 0]}


def test_at_shutdown_an_arrival_past_the_bound_drops_unless_staleness_is_soft(
    tmp_path: Path,
) -> None:
    dropped = {}
    for staleness in ("per-episode", "soft"):
        path = tmp_path / staleness
        with recorder(path, staleness=staleness, max_off_policy_steps=0, target_lag=0) as rec:
            rec.open_group(1.0, "a", env="math", task="t1")
            rec.dispatch(1.0, "a", "e0")  # at v0
            _ship_a_batch(rec, 1.5)  # batch 1: e0 is age 1 from here on
            rec.complete(2.0, "e0", reward=1.0, prompt_tokens=1, completion_tokens=1)
        events = read_log(path / "run.arrow")
        dropped[staleness] = [e.episode_id for e in events if e.kind == "episode_dropped"]
        assert replay_problems(path / "run.arrow") == []
    assert dropped == {"per-episode": [f"{ours(tmp_path / 'per-episode', 'a')}/0"], "soft": []}


def _docs_run(rec: Recorder) -> None:
    """docs/foreign-runs.md's hand-written run, through the recording API: at its end g2
    has one fresh arrival and g3 none, so the shutdown protocol finalizes both."""
    rec.open_group(0.01, "a", env="gsm8k", task="gsm8k/17")
    rec.dispatch(0.02, "a", "a0")
    rec.dispatch(0.02, "a", "a1")
    rec.complete(1.5, "a0", reward=1.0, prompt_tokens=120, completion_tokens=310)
    rec.open_group(1.51, "b", env="gsm8k", task="gsm8k/5")
    rec.dispatch(1.52, "b", "b0")
    rec.complete(2.25, "a1", reward=0.0, prompt_tokens=120, completion_tokens=505)
    rec.dispatch(2.26, "b", "b1")
    rec.score(2.27, "a", {"a0": 0.5, "a1": -0.5}, admitted=True)
    rec.ship(2.28, ["a0", "a1"])
    rec.complete(3.0, "b0", reward=1.0, prompt_tokens=98, completion_tokens=212)
    rec.open_group(3.02, "c", env="gsm8k", task="gsm8k/40")
    rec.dispatch(3.03, "c", "c0")
    rec.finish(4.0, reason="done")


@pytest.mark.parametrize(("curriculum", "admitted"), [("all", True), ("informative", False)])
def test_the_shutdown_scoring_asks_the_curriculum_as_the_deciders_do(
    tmp_path: Path, curriculum: str, admitted: bool
) -> None:
    config = {"max_inflight": 2, "curriculum": curriculum}
    with recorder(tmp_path, **config) as rec:
        _docs_run(rec)
    path = tmp_path / "run.arrow"
    scored = {e.group_id: e.admitted for e in read_log(path) if e.kind == "group_scored"}
    assert scored == {"g1": True, "g2": admitted, "g3": False}  # g2: one member, reward 1
    verdict = check_conformance(open_log(path), "per-episode", t_tolerance=0.05)
    assert verdict.ok, verdict
