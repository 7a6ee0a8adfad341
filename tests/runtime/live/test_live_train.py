"""`rolloutlog train` end to end: two CPU servers over HTTP, a trainer, a log that verifies.

The full learning run (reward 0.1 -> 0.8) is a benchmark (benchmarks/learning.py);
this test runs a short one that must train, record, verify, and show the staleness
machinery at work: with `max_off_policy_steps=0`, every weight update makes the episodes
still in flight stale, so the dispatcher cancels them and the driver aborts them.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log
from tests.runtime.live.live_helpers import train_checked, verified_summary

STEPS = 15  # enough updates for cancellations and two servers; learning is benchmarks/learning.py's


def test_train_learns_records_and_verifies_on_two_servers(tmp_path):
    log = tmp_path / "train.arrow"
    arguments = ["train", "--steps", str(STEPS), "--seed", "3", "--json", "--log", str(log)]
    for setting in (
        "servers=2",
        "max_off_policy_steps=0",
        "target_lag=0",
        "batch_size=128",
        "max_inflight=128",
        "learning_rate=1e-3",
        "server_min_step_s=0.04",  # episodes outlast a train step, so some are cancelled
        "check_invariants=true",
    ):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)

    assert report["finished_reason"] == "steps" and report["error"] is None
    assert report["steps_shipped"] == STEPS and report["run_finished"] == "steps"
    assert len(report["reward_curve"]) == STEPS and report["wall_seconds"] > 0
    assert report["invariant_violations"] == [] and report["replay_error"] is None
    # both servers answered over HTTP, and every version up to the last trained went live
    assert [e["alive"] for e in report["endpoints"]] == [True, True]
    assert all(e["generations"] > 0 for e in report["endpoints"]), report["endpoints"]
    assert report["version_live"] >= STEPS - 2 and report["versions_trained"] == STEPS
    # the bound holds: nothing older than max_off_policy_steps = 0 trained. How many episodes
    # go stale, and how fast the reward rises, depend on thread scheduling: learning speed
    # is measured by benchmarks/learning.py, not asserted here.
    assert report["max_trained_age"] == 0

    summary = verified_summary(log)
    # the accounting balances: each dispatched episode arrived once or was cancelled once
    arrived = summary["episodes_completed"] + summary["episodes_failed"] - summary["episodes_late"]
    cancelled = sum(summary["episodes_cancelled"].values())
    assert summary["episodes_dispatched"] == arrived + cancelled, summary
    assert summary == {k: report[k] for k in summary}
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output
    replayed = json.loads(CliRunner().invoke(main, ["replay", "--json", str(log)]).stdout)
    assert replayed.pop("error") is None  # train names it replay_error; its error is a fault
    assert {key: report[key] for key in replayed} == replayed  # every key of replay --json


def test_train_refuses_bad_settings_and_existing_logs(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(main, ["train", "--set", "no_such_key=1"])
    assert bad.exit_code == 2 and "unknown key" in bad.output
    lag = runner.invoke(main, ["train", "--set", "target_lag=2", "--set", "max_off_policy_steps=1"])
    assert lag.exit_code == 2 and "target_lag" in lag.output
    existing = tmp_path / "exists.arrow"
    existing.write_bytes(b"")
    taken = runner.invoke(main, ["train", "--log", str(existing)])
    assert taken.exit_code == 2 and "exists" in taken.output
    vllm = runner.invoke(main, ["train", "--backend", "vllm"])
    assert vllm.exit_code == 2 and "--url" in vllm.output


def test_save_initial_writes_a_checkpoint_that_a_server_loads(tmp_path):
    from rolloutlog.runtime.live.model import load_checkpoint

    result = CliRunner().invoke(main, ["train", "--save-initial", str(tmp_path / "v0")])
    assert result.exit_code == 0, result.output
    model = load_checkpoint(tmp_path / "v0")
    assert model.config.hidden_size == 128


def test_train_piped_prints_progress_lines_on_stderr(tmp_path):
    """Off a terminal (CliRunner's stderr is not one) the first and last steps are lines."""
    arguments = ["train", "--steps", "2", "--log", str(tmp_path / "p.arrow")]
    for setting in ("group_size=4", "batch_size=16", "max_inflight=16", "server_mode=thread"):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("step ")]
    assert [line.split("  ")[0] for line in lines] == ["step 1/2", "step 2/2"], result.stderr
    assert "reward " in lines[0] and "ages " in lines[0]
    assert result.stderr.splitlines()[-1].startswith("rolloutlog: next: rolloutlog verify ")


def test_train_runs_a_field_preset_and_its_log_verifies(tmp_path):
    """`--policy prime-rl` sets every key of the preset in the recorded config; the live
    driver carries out its decisions (lag one at bound 0, stale open groups cancelled whole)
    with the invariants checked on every event, and the log re-decides."""
    log = tmp_path / "prime.arrow"
    settings = ("group_size=4", "batch_size=16", "max_inflight=16")
    report = train_checked(
        log,
        ["--policy", "prime-rl", "--steps", "4"],
        (*settings, "max_off_policy_steps=0", "target_lag=0"),
    )
    assert report["max_trained_age"] == 0
    started = read_log(log)[0]
    assert started.config["gate_lag"] == "one" and started.config["stale_cancel"] == "open"


def test_train_runs_pipelinerl_with_a_bounded_queue_and_its_log_verifies(tmp_path):
    """`--policy pipelinerl` records its bounded queue (here at one batch, so that a held
    batch makes the queue evict); the live driver carries out evictions as any drop, with
    the invariants checked on every event, and the log re-decides."""
    log = tmp_path / "pipelinerl.arrow"
    settings = ("group_size=4", "batch_size=16", "max_inflight=16", "target_lag=0")
    report = train_checked(
        log, ["--policy", "pipelinerl", "--steps", "3"], (*settings, "queue_limit=16")
    )
    assert "episodes_evicted" in report
    started = read_log(log)[0]
    assert started.config["staleness"] == "soft" and started.config["queue_limit"] == 16


def test_train_refuses_an_unknown_policy_as_simulate_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["train", "--policy", "per-batch", "--steps", "1"])
    assert result.exit_code == 2
    assert "--policy: policy 'per-batch': must start with one of per-episode" in result.output
    assert not list(tmp_path.iterdir())


def test_train_runs_tinker_822_and_carries_out_its_wait(tmp_path):
    """`--policy tinker-822` on a bound of one: the live driver holds a full batch while a
    group at its last chance runs (the account checks on every event that no batch ships
    past one, and the outstanding cap at every opening), reports the waits, and the log
    re-decides."""
    log = tmp_path / "tinker822.arrow"
    settings = ("group_size=4", "batch_size=8", "max_inflight=16", "max_off_policy_steps=1")
    # episodes outlast a train step, so batches wait
    report = train_checked(
        log, ["--policy", "tinker-822", "--steps", "6"], (*settings, "server_min_step_s=0.04")
    )
    assert report["episodes_dropped_stale"] == 0
    summary = verified_summary(log)
    assert (summary["ship_waits"], summary["ship_wait_seconds"]) == (
        report["ship_waits"],
        report["ship_wait_seconds"],
    )
    started = read_log(log)[0]
    assert started.config["ship_wait"] == "last-chance"
    assert started.config["admission"] == "outstanding"


def test_train_runs_slime_oversample_and_aborts_its_leftovers(tmp_path):
    """`--policy slime-oversample` with rounds of six groups for batches of four: the live
    driver aborts the two groups a full batch leaves out (reason `leftover`), steps run
    synchronously (every trained episode of age 0), and the log re-decides."""
    log = tmp_path / "slime.arrow"
    settings = ("group_size=4", "batch_size=16", "max_inflight=24", "over_sampling_batch_size=6")
    report = train_checked(log, ["--policy", "slime-oversample", "--steps", "3"], settings)
    assert report["max_trained_age"] == 0
    events = read_log(log)
    assert events[0].config["leftovers"] == "abort"
    assert any(e.kind == "episodes_cancelled" and e.reason == "leftover" for e in events)
