"""`rolloutlog train --resume`: a real `rolloutlog train` process, SIGKILLed at each named
crash point in turn (ROLLOUTLOG_CRASH_AT, so the kill lands at the same place every time),
resumed each time into the same log, which must verify, balance, and finish its steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import EpisodesCancelled, RunResumed
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.live.crash_points import ENVIRONMENT_VARIABLE, CrashPoints
from rolloutlog.runtime.live.episodes import Rollout
from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.rollout_store import RolloutStore, read_store
from rolloutlog.runtime.live.session import initial_model
from rolloutlog.runtime.live.settings import build_settings

STEPS = 8
SETTINGS = (
    "group_size=4",
    "batch_size=16",
    "max_inflight=16",
    "server_mode=thread",
    "check_invariants=true",
)
# Each resumed process dies at the next point; the first dies while dispatching.
CRASHES = ("dispatch:40", "pending:1", "shipped:1", "commit:2")


def _train(
    arguments: list[str], crash: str | None, timeout_s: float = 240
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != ENVIRONMENT_VARIABLE}
    if crash is not None:
        environment[ENVIRONMENT_VARIABLE] = crash
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]
    return subprocess.run(
        command + arguments, env=environment, capture_output=True, text=True, timeout=timeout_s
    )


def _assert_verifies(log: Path) -> None:
    verification = verify_log(open_log(log))
    assert verification.divergence is None and verification.error is None, verification


def test_a_run_killed_at_every_point_resumes_into_one_log_that_verifies(tmp_path: Path) -> None:
    log, weights = tmp_path / "run.arrow", tmp_path / "weights"
    start = ["--steps", str(STEPS), "--seed", "1", "--log", str(log), "--weights-dir", str(weights)]
    for setting in SETTINGS:
        start += ["--set", setting]
    for number, crash in enumerate(CRASHES):
        arguments = start if number == 0 else ["--resume", str(log)]
        crashed = _train(arguments, crash)
        assert crashed.returncode == -signal.SIGKILL, (crash, crashed.stderr[-2000:])
        _assert_verifies(log)  # whatever was durable at the kill verifies
    finished = _train(["--resume", str(log), "--json"], None)
    assert finished.returncode == 0, finished.stderr[-2000:]
    report = json.loads(finished.stdout)

    assert report["finished_reason"] == "steps" and report["error"] is None
    assert report["steps_shipped"] == STEPS and report["restarts"] == len(CRASHES)
    assert report["invariant_violations"] == [] and report["replay_error"] is None
    _assert_verifies(log)

    events = list(LogReader(log))
    restarts = [e for e in events if isinstance(e, RunResumed)]
    assert any("torn tail" in r.reason for r in restarts), "the commit crash tears the log"
    # Accounting: every dispatched episode is resolved exactly once: it arrived before any
    # cancellation, or a cancellation (a restart's included) covers it.
    cancelled = [i for e in events if isinstance(e, EpisodesCancelled) for i in e.episode_ids]
    restart_cancelled = {
        i
        for e in events
        if isinstance(e, EpisodesCancelled) and e.reason == "restart"
        for i in e.episode_ids
    }
    assert restart_cancelled == {i for r in restarts for i in r.episode_ids}
    assert len(cancelled) == len(set(cancelled))
    dispatched = [e.episode_id for e in events if e.kind == "episode_dispatched"]  # type: ignore[union-attr]
    assert len(dispatched) == len(set(dispatched))
    summary = replay_log(open_log(log)).summary
    arrived = summary["episodes_completed"] + summary["episodes_failed"] - summary["episodes_late"]
    assert arrived + len(cancelled) == len(dispatched)
    # Nothing trained twice, nothing lost: versions follow steps exactly once each (the
    # checker proves it on every event); the trainer made every step's version, and the
    # final weights moved away from the initial ones.
    assert report["versions_trained"] == STEPS
    _, settings = build_settings({}, seed=1)
    trained = load_checkpoint(weights / f"v{STEPS}").state_dict()
    initial = initial_model(settings, 1).state_dict()
    assert any(not torch.equal(trained[name], initial[name]) for name in initial)

    # show treats the restart like any event: the state at it, an episode it cancelled
    restart_seq, cancelled_id = restarts[0].seq, restarts[0].episode_ids[0]
    runner = CliRunner()
    state = runner.invoke(main, ["show", str(log), "--at", str(restart_seq), "--json"])
    assert state.exit_code == 0 and json.loads(state.stdout)["event"]["kind"] == "run_resumed"
    story = runner.invoke(main, ["show", str(log), "--episode", cancelled_id, "--json"])
    assert story.exit_code == 0 and '"restart"' in story.stdout

    again = runner.invoke(main, ["train", "--resume", str(log)])
    assert again.exit_code == 2 and "nothing to resume" in again.stderr
    assert "stopped without one: Ctrl-C, SIGTERM" in " ".join(again.stderr.split())


def test_resume_refuses_what_the_run_already_fixed(tmp_path: Path) -> None:
    runner = CliRunner()
    seeded = runner.invoke(main, ["train", "--resume", str(tmp_path / "x.arrow"), "--seed", "3"])
    assert seeded.exit_code == 2 and "--seed: not with --resume" in seeded.stderr
    missing = runner.invoke(main, ["train", "--resume", str(tmp_path / "x.arrow")])
    assert missing.exit_code == 2 and "x.arrow: no such log" in missing.stderr


def test_crash_points_are_named_and_counted() -> None:
    points = CrashPoints("pending:2, commit:1")
    assert [points.reached("pending") for _ in range(3)] == [False, True, False]
    assert points.reached("commit") and not points.reached("dispatch")
    with pytest.raises(ValueError, match="NAME:N"):
        CrashPoints("nowhere:1")


def test_the_rollout_store_keeps_synced_rollouts_and_cuts_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "run.arrow.rollouts"
    rollout = Rollout(
        prompt_ids=(1, 2), completion_ids=(3,), logprobs=(-0.1 / 3,), reward=0.5, version=2
    )
    resumed = Rollout(  # interrupted once: its second token from v3
        prompt_ids=(1, 2),
        completion_ids=(3, 4),
        logprobs=(-0.5, -1.25),
        reward=1.0,
        version=2,
        token_versions=(2, 3),
    )
    store = RolloutStore(path)
    store.note(seed=4)
    store.keep("g1/0", rollout)
    store.keep("g2/0", resumed)
    store.sync()
    store.keep("g1/1", rollout)  # appended, never synced: lost with the process
    with path.open("a") as handle:
        handle.write('{"e":"g1/2","p":[1')  # a line torn by the crash
    stored = read_store(path)
    assert stored.meta == {"seed": 4} and stored.rollout("g1/0") == rollout
    assert stored.rollout("g2/0") == resumed and '"t"' not in stored.lines["g1/0"]
    assert stored.rollout("g1/1") is None and stored.rollout("g1/2") is None
    RolloutStore(path, append=True).close()
    assert path.read_text().endswith("\n")


def test_a_plain_run_killed_mid_run_resumes_from_the_weights_beside_its_log(
    tmp_path: Path,
) -> None:
    """No --weights-dir: the checkpoints are kept in LOG.weights/, so --resume finds them."""
    log = tmp_path / "plain.arrow"
    start = ["--steps", "3", "--seed", "2", "--log", str(log)]
    for setting in SETTINGS:
        start += ["--set", setting]
    crashed = _train(start, "shipped:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert (tmp_path / "plain.arrow.weights" / "v0" / "READY").is_file()
    finished = _train(["--resume", str(log), "--json"], None)
    assert finished.returncode == 0, finished.stderr[-2000:]
    report = json.loads(finished.stdout)
    assert report["finished_reason"] == "steps" and report["steps_shipped"] == 3
    assert report["restarts"] == 1
    _assert_verifies(log)
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output


def test_a_run_that_interrupts_resumes_from_a_log_with_interruptions(tmp_path: Path) -> None:
    """`per-episode+interrupt`, killed as its third update is announced: the log it leaves
    holds interruptions and resumptions, and the resumed run re-decides them and finishes.

    An update interrupts only what is in flight when it lands, so inference must still be
    generating the next batch when a train step ends. At 10 ms a server step the two took
    about as long, and a CI machine once finished the batch first (no interruption); at
    50 ms a step the next batch takes ten times a train step here."""
    log = tmp_path / "interrupt.arrow"
    start = ["--steps", "5", "--seed", "3", "--log", str(log), "--policy", "per-episode+interrupt"]
    for setting in (*SETTINGS, "server_min_step_s=0.05"):
        start += ["--set", setting]
    crashed = _train(start, "pending:3")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    _assert_verifies(log)
    kinds = [event.kind for event in LogReader(log)]
    assert "episode_interrupted" in kinds and "episode_resumed" in kinds
    stored = read_store(tmp_path / "interrupt.arrow.rollouts")
    assert any('"t":' in line for line in stored.lines.values()), "a resumed rollout was kept"
    finished = _train(["--resume", str(log), "--json"], None)
    assert finished.returncode == 0, finished.stderr[-2000:]
    report = json.loads(finished.stdout)
    assert report["finished_reason"] == "steps" and report["restarts"] == 1
    assert report["invariant_violations"] == [] and report["replay_error"] is None
    assert report["episodes_interrupted"] >= kinds.count("episode_interrupted")
    _assert_verifies(log)
