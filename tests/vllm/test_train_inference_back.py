"""A real `vllm serve` SIGKILLed mid-run and started again on its port: the run waits for
it (`endpoint_wait_s`), gives it the live weights, and goes on to its steps.

It starts a server of its own (the session's two are left to the other tests).
"""

from __future__ import annotations

import threading

from rolloutlog.runtime.live.vllm_launch import VLLMProcess
from tests.runtime.live.live_helpers import on_warning, run_driver, verified_summary
from tests.vllm.conftest import START_TIMEOUT_S, vllm_command

STEPS = 8


def test_a_vllm_server_killed_and_restarted_mid_run_rejoins_and_the_run_goes_on(
    vllm_checkpoint, tmp_path
):
    command = vllm_command()

    def serve(port: int | None = None) -> VLLMProcess:
        log = tmp_path / f"vllm-{port or 'first'}.log"
        return VLLMProcess(
            command, vllm_checkpoint, log_path=log, start_timeout_s=START_TIMEOUT_S, port=port
        )

    servers = [serve().wait_healthy()]
    url = servers[0].url

    def kill(stats):
        if stats.step == 3:
            servers[0].kill()

    done = threading.Event()

    def keep_restarted() -> None:  # the server dies with the thread that started it
        servers.append(serve(servers[0].port))
        done.wait()

    def restart() -> None:  # off the event loop: the pool keeps health-checking meanwhile
        threading.Thread(target=keep_restarted).start()

    try:
        with on_warning("waiting up to", restart) as waiting:
            result, log = run_driver(
                tmp_path, [url], steps=STEPS, on_step=kill, endpoint_wait_s=START_TIMEOUT_S
            )
    finally:
        for server in servers:
            server.stop()
        done.set()
    assert waiting.done and len(servers) == 2
    assert result.finished_reason == "steps" and result.error is None, result
    summary = verified_summary(log)
    assert summary["steps_shipped"] == STEPS and summary["run_finished"] == "steps"
    assert result.endpoints[0]["alive"] and result.version_live >= STEPS - 2
