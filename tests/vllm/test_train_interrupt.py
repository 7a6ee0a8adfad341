"""`weight_update = interrupt` against real `vllm serve` (CPU build 0.32), invariants checked.

Each weight update pauses both servers with `mode=abort`: the episodes then generating
come back with their tokens so far (`episode_interrupted`), are resubmitted as prompt
token ids once the update is live (`episode_resumed`), and train with each token's
version and the logprob that version's weights gave it.
"""

from __future__ import annotations

from collections import Counter

from rolloutlog.events.log_reader import read_log
from rolloutlog.runtime.live.episodes import TrainSample
from tests.runtime.live.interrupt_scenario import check_trained, recording
from tests.runtime.live.live_helpers import run_driver, verified_summary


def test_train_against_vllm_interrupts_resumes_and_trains_each_tokens_version(vllm, tmp_path):
    trained: list[TrainSample] = []
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
    )
    assert result.finished_reason == "steps" and result.error is None
    summary = verified_summary(log)
    kinds = Counter(event.kind for event in read_log(log))
    assert kinds["episode_interrupted"] > 0 and kinds["episode_resumed"] > 0
    assert summary["episodes_failed"] == 0 and summary["partial_ratio"] > 0
    check_trained(trained, tmp_path / "weights")
