"""`rolloutlog train --backend vllm` against two real `vllm serve` processes, then one killed.

The kill comes last (this file runs after test_routes.py, and the kill test after the
training test): the killed server stays dead for the rest of the session.
"""

from __future__ import annotations

import json
import logging

from click.testing import CliRunner

from rolloutlog.cli import main
from tests.runtime.live.live_helpers import failures, run_driver, verified_summary

STEPS = 15  # two servers, every update live and verified; learning is benchmarks/learning.py's


def test_train_against_vllm_verifies_and_replays_with_no_failed_episode(vllm, tmp_path):
    log = tmp_path / "train.arrow"
    arguments = ["train", "--backend", "vllm", "--steps", str(STEPS), "--seed", "0", "--json"]
    arguments += ["--log", str(log), "--weights-dir", str(tmp_path / "weights")]
    for server in vllm:
        arguments += ["--url", server.url]
    for setting in ("batch_size=128", "max_inflight=128", "check_invariants=true"):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)

    assert report["finished_reason"] == "steps" and report["error"] is None
    assert report["steps_shipped"] == STEPS and report["episodes_failed"] == 0
    assert report["invariant_violations"] == [] and report["replay_error"] is None
    assert [e["alive"] for e in report["endpoints"]] == [True, True]
    assert all(e["generations"] > 0 for e in report["endpoints"]), report["endpoints"]
    assert report["version_live"] >= STEPS - 2 and report["versions_trained"] == STEPS
    summary = verified_summary(log)
    assert summary == {k: report[k] for k in summary}
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output


def test_a_vllm_server_killed_mid_run_leaves_rotation_and_its_episodes_fail(vllm, tmp_path, caplog):
    killed = vllm[1]

    def kill_second(stats):
        if stats.step == 3:
            killed.kill()

    with caplog.at_level(logging.WARNING):
        result, log = run_driver(
            tmp_path, [server.url for server in vllm], steps=8, on_step=kill_second
        )
    assert not killed.running
    assert result.finished_reason == "steps" and result.error is None
    assert f"inference endpoint {killed.url} taken out of rotation" in caplog.text
    assert [e["alive"] for e in result.endpoints] == [True, False]
    errors = failures(log)
    assert errors, "the killed server had episodes in flight; they must be recorded as failed"
    assert all(killed.url in e for e in errors), errors
    summary = verified_summary(log)
    assert summary["steps_shipped"] == 8 and summary["episodes_failed"] == len(errors)
