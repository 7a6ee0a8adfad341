"""Faults in a live run: each is a clear error or a bounded retry, and the log verifies.

Servers that must die as a crashed replica would are processes (SIGKILL); the others are
threads, whose engines a test can make fail or slow.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rolloutlog.runtime.live.client import ClientLimits
from rolloutlog.runtime.live.model import WEIGHTS_FILE
from rolloutlog.runtime.live.twin.launch import ServerProcess, server_processes, server_threads
from rolloutlog.runtime.live.twin.server import InferenceServer
from tests.runtime.live.live_helpers import failures, on_warning, run_driver, verified_summary


def test_a_server_killed_mid_run_fails_its_episodes_and_the_run_goes_on(checkpoints, tmp_path):
    with server_processes(checkpoints["a"], 2) as processes:

        def kill_second(stats):
            if stats.step == 2:
                processes[1].kill()

        result, log = run_driver(tmp_path, [p.url for p in processes], steps=6, on_step=kill_second)
    assert result.finished_reason == "steps" and result.error is None
    summary = verified_summary(log)
    assert summary["steps_shipped"] == 6 and summary["run_finished"] == "steps"
    errors = failures(log)
    assert errors, "the killed server had episodes in flight; they must be recorded as failed"
    assert all("EndpointLost" in e or "InferenceUnavailable" in e for e in errors), errors
    assert any(processes[1].url in e for e in errors), errors


def test_losing_the_only_server_for_good_stops_the_run_resumable(checkpoints, tmp_path):
    """No server comes back (no wait here): the run stops as a crash does, without
    run_finished, so that `train --resume` can continue it once inference is back."""
    with server_processes(checkpoints["a"], 1) as processes:

        def kill(stats):
            if stats.step == 2:
                processes[0].kill()

        dead_url = processes[0].url
        result, log = run_driver(tmp_path, [dead_url], steps=20, on_step=kill)
    assert result.finished_reason == "inference_lost"
    error = result.error or ""
    assert "no inference endpoint is left in rotation" in error and dead_url in error, error
    summary = verified_summary(log)  # valid and replayable up to the fault
    assert summary["run_finished"] is None
    assert summary["episodes_failed"] > 0 and summary["steps_shipped"] < 20


def test_a_server_killed_and_restarted_mid_run_rejoins_and_the_run_goes_on(checkpoints, tmp_path):
    processes = [ServerProcess(checkpoints["b"])]  # a restart starts from other weights
    port = int(processes[0].url.rsplit(":", 1)[1])

    def kill(stats):
        if stats.step == 2:
            processes[0].kill()

    def restart() -> None:  # off the event loop: the pool keeps health-checking meanwhile
        threading.Thread(
            target=lambda: processes.append(ServerProcess(checkpoints["b"], port=port))
        ).start()

    try:
        with on_warning("waiting up to", restart) as waiting:
            result, log = run_driver(
                tmp_path, [processes[0].url], steps=6, on_step=kill, endpoint_wait_s=600
            )
    finally:
        for process in processes:
            process.stop()
    assert waiting.done and len(processes) == 2
    assert result.finished_reason == "steps" and result.error is None, result
    summary = verified_summary(log)
    assert summary["steps_shipped"] == 6 and summary["run_finished"] == "steps"
    assert summary["episodes_failed"] > 0  # what was in flight at the kill
    assert result.endpoints[0]["alive"] and result.version_live >= 4


def _fail_reloads(servers: list[InferenceServer], failing: set[int]) -> list[int]:
    """Make each server's weight reload number k (1-based) fail when k is in `failing`.

    Reload 1 is the driver making v0 live; reload 2 is v1, and so on. Returns the counts.
    """
    counts = [0] * len(servers)
    for index, server in enumerate(servers):
        original = server.engine.reload_weights

        def reload(path, index=index, original=original):
            counts[index] += 1
            if counts[index] in failing:
                raise OSError(f"disk read error (injected, reload {counts[index]})")
            original(path)

        server.engine.reload_weights = reload  # type: ignore[method-assign]
    return counts


def test_a_weight_reload_that_fails_once_is_retried(checkpoints, tmp_path, caplog):
    with server_threads(checkpoints["a"], 2) as servers:
        counts = _fail_reloads(servers, failing={2})
        with caplog.at_level(logging.WARNING):
            result, log = run_driver(tmp_path, [s.url for s in servers], steps=4)
    assert result.finished_reason == "steps" and result.error is None
    assert "update to v1 failed (attempt 1)" in caplog.text
    assert min(counts) >= 4  # v0, v1 failed, v1 again, v2 ...
    assert result.version_live >= 2
    verified_summary(log)


def test_a_weight_reload_that_keeps_failing_stops_the_run_after_bounded_retries(
    checkpoints, tmp_path
):
    with server_threads(checkpoints["a"], 2) as servers:
        counts = _fail_reloads(servers, failing=set(range(2, 100)))
        result, log = run_driver(tmp_path, [s.url for s in servers], steps=6)
    assert result.finished_reason == "weight_update_failed"
    assert "weight update to v1 failed 3 times; inference still serves v0" in (result.error or "")
    assert "disk read error" in (result.error or "")
    assert counts == [4, 4]  # v0, then exactly three tries of v1
    summary = verified_summary(log)
    assert summary["run_finished"] == "weight_update_failed"


def test_a_reload_that_fails_on_one_server_takes_it_out_and_the_run_goes_on(checkpoints, tmp_path):
    with server_threads(checkpoints["a"], 2) as servers:
        _fail_reloads([servers[1]], failing={2})
        result, log = run_driver(tmp_path, [s.url for s in servers], steps=5)
    assert result.finished_reason == "steps" and result.error is None
    verified_summary(log)


def test_a_torn_checkpoint_is_never_loaded_and_stops_the_run(checkpoints, tmp_path):
    def tear_v2(trainer):
        publish = trainer.broadcast.publish

        def torn(model, version):
            path = publish(model, version)
            if version == 2:  # the weights changed after READY was written
                weights = path / WEIGHTS_FILE
                weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
            return path

        trainer.broadcast.publish = torn

    with server_threads(checkpoints["a"], 1) as servers:
        result, log = run_driver(tmp_path, [servers[0].url], steps=6, prepare=tear_v2)
    assert result.finished_reason == "weight_update_failed"
    assert "v2 is not ready to load" in (result.error or "")
    assert "does not match its READY digest" in (result.error or "")
    assert result.version_live == 1
    assert verified_summary(log)["run_finished"] == "weight_update_failed"


def test_generate_timeouts_are_recorded_as_failures_and_the_run_goes_on(checkpoints, tmp_path):
    with (
        server_threads(checkpoints["a"], 1) as fast,
        server_threads(checkpoints["a"], 1, min_step_s=0.2) as slow,
    ):
        limits = ClientLimits(generate_timeout_s=0.3, backoff_s=0.05)
        result, log = run_driver(tmp_path, [fast[0].url, slow[0].url], steps=10, limits=limits)
    assert result.finished_reason == "steps" and result.error is None
    errors = failures(log)
    assert errors and any("ReadTimeout" in e for e in errors), errors
    verified_summary(log)


def test_when_every_generate_times_out_the_run_stops_for_zero_output(checkpoints, tmp_path):
    with server_threads(checkpoints["a"], 1, min_step_s=0.15) as slow:
        limits = ClientLimits(generate_timeout_s=0.3, backoff_s=0.05)
        result, log = run_driver(
            tmp_path,
            [slow[0].url],
            steps=4,
            limits=limits,
            overrides={"zero_output_batches": 1},
        )
    assert result.finished_reason == "zero_output"
    assert "no fresh successful member" in (result.error or "")
    summary = verified_summary(log)
    assert summary["run_finished"] == "zero_output" and summary["episodes_completed"] == 0


def test_without_a_reachable_server_the_run_never_starts(tmp_path: Path):
    """v0 cannot go live, so nothing is dispatched and nothing is recorded."""
    result, _ = run_driver(tmp_path, ["http://127.0.0.1:9"], steps=2)
    assert result.finished_reason == "inference_lost", result
    assert "127.0.0.1:9" in (result.error or "") and result.events == 0
