"""`weight_update = interrupt` against real `vllm serve` (CPU build 0.32), invariants checked.

Each weight update pauses both servers with `mode=abort`: the episodes then generating
come back with their tokens so far (`episode_interrupted`), are resubmitted as prompt
token ids once the update is live (`episode_resumed`), and train with each token's
version and the logprob that version's weights gave it.

A run's completions are a few tokens long: on a quiet machine vLLM ends every one before
the update pauses it, on a loaded one not. So each endpoint's client freezes a request it
has in flight mid-generation just before the abort-mode pause (tests/vllm/stepping.py,
`FreezingClient`): every update that has work in flight finds some generating, on any
machine, and what the driver then does with it is what the test checks.
"""

from __future__ import annotations

from collections import Counter

from rolloutlog.events.log_reader import read_log
from rolloutlog.runtime.live.client import ClientLimits
from rolloutlog.runtime.live.episodes import TrainSample
from tests.runtime.live.interrupt_scenario import check_trained, recording
from tests.runtime.live.live_helpers import run_driver, verified_summary
from tests.vllm.stepping import FreezingClient


def test_train_against_vllm_interrupts_resumes_and_trains_each_tokens_version(vllm, tmp_path):
    trained: list[TrainSample] = []
    clients: list[FreezingClient] = []

    def connect(url: str, *, limits: ClientLimits | None = None) -> FreezingClient:
        clients.append(FreezingClient(url, limits=limits))
        return clients[-1]

    result, log = run_driver(
        tmp_path,
        [server.url for server in vllm if server.running],
        steps=6,
        overrides={
            "weight_update": "interrupt",
            "batch_size": 64,
            "max_inflight": 64,
            "max_off_policy_steps": 2,
            "target_lag": 2,
        },
        prepare=recording(trained),
        connect=connect,
    )
    assert result.finished_reason == "steps" and result.error is None
    assert sum(client.frozen for client in clients) > 0, "no update found work in flight"
    summary = verified_summary(log)
    kinds = Counter(event.kind for event in read_log(log))
    assert kinds["episode_interrupted"] > 0 and kinds["episode_resumed"] > 0
    assert summary["episodes_failed"] == 0 and summary["partial_ratio"] > 0
    check_trained(trained, tmp_path / "weights")
