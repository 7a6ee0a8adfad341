"""`weight_update = interrupt` and `drain` carried out by the live driver on the CPU twin.

Each weight update pauses the twin in abort mode: episodes then generating are recorded
`episode_interrupted`, resubmitted with their tokens so far once the update is live
(`episode_resumed`), and trained with every token's version and behaviour logprob. The
twin runs as vLLM 0.33 (a generate sent during the pause is refused with 503) and as 0.32
(queued). Every invariant is checked on every event and `verify` re-decides the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import WORLD_KINDS
from rolloutlog.runtime.live.episodes import TrainSample
from rolloutlog.runtime.live.twin.launch import serve_in_thread
from rolloutlog.runtime.live.twin.server import InferenceServer
from tests.runtime.live.interrupt_scenario import check_trained, recording
from tests.runtime.live.live_helpers import run_driver, train_checked, verified_summary

STEP_S = 0.01  # a decode step lasts at least this: updates find episodes mid-generation


@pytest.fixture(params=[False, True], ids=["vllm-0.33", "vllm-0.32"])
def twin(request: pytest.FixtureRequest, checkpoints: dict[str, Path]) -> Iterator[InferenceServer]:
    started = serve_in_thread(checkpoints["a"], min_step_s=STEP_S, queue_when_paused=request.param)
    yield started
    started.stop()


def test_interrupted_episodes_resume_and_train_with_each_tokens_version(tmp_path, twin):
    trained: list[TrainSample] = []
    result, log = run_driver(
        tmp_path,
        [twin.url],
        steps=6,
        overrides={"weight_update": "interrupt", "max_off_policy_steps": 2, "target_lag": 2},
        prepare=recording(trained),
    )
    assert result.finished_reason == "steps" and result.error is None
    summary = verified_summary(log)
    kinds = Counter(event.kind for event in read_log(log))
    assert kinds["episode_interrupted"] > 0 and kinds["episode_resumed"] > 0
    assert summary["episodes_interrupted"] == kinds["episode_interrupted"]
    assert summary["episodes_failed"] == 0  # no abort of the update was taken for a failure
    assert summary["largest_version_span"] >= 1 and summary["partial_ratio"] > 0

    check_trained(trained, tmp_path / "weights")


def test_drain_publishes_only_once_the_train_work_in_flight_arrived(tmp_path, checkpoints):
    server = serve_in_thread(checkpoints["a"], min_step_s=STEP_S)
    try:
        result, log = run_driver(
            tmp_path, [server.url], steps=4, overrides={"weight_update": "drain"}
        )
    finally:
        server.stop()
    assert result.finished_reason == "steps" and result.error is None
    summary = verified_summary(log)  # the account refuses a train dispatch while one waits
    assert summary["episodes_failed"] == 0 and summary["episodes_interrupted"] == 0
    waited, undrained, dispatched_while_waiting = _drain_windows(read_log(log))
    assert max(waited) > 0, "an update found train work in flight and waited for it"
    assert undrained == 0 and dispatched_while_waiting == 0


def _drain_windows(events: list[Any]) -> tuple[list[int], int, int]:
    """Per update, the train episodes in flight once its announcement's reaction settled;
    how many of those were still in flight at its `version_live`; and the train
    dispatches between announcements and their `version_live`."""
    train_groups: set[str] = set()
    inflight: set[str] = set()
    owed: set[str] | None = None
    waited, undrained, dispatched, waiting = [], 0, 0, False
    for event in events:
        if owed is None and waiting and event.kind in WORLD_KINDS:
            owed = set(inflight)  # the reaction (stale cancellations) is in
            waited.append(len(owed))
        match event.kind:
            case "group_opened" if event.work == "train":
                train_groups.add(event.group_id)
            case "episode_dispatched" if event.group_id in train_groups:
                inflight.add(event.episode_id)
                dispatched += waiting
            case "episode_completed" | "episode_failed":
                inflight.discard(event.episode_id)
            case "episodes_cancelled":
                inflight.difference_update(event.episode_ids)
            case "version_pending":
                waiting, owed = True, None
            case "version_live":
                undrained += len((owed or set()) & inflight)
                waiting = False
    return waited, undrained, dispatched


def test_train_runs_per_episode_interrupt_and_its_log_verifies(tmp_path):
    log = tmp_path / "interrupt.arrow"
    small = ("group_size=4", "batch_size=16", "max_inflight=16", f"server_min_step_s={STEP_S}")
    lag = ("max_off_policy_steps=2", "target_lag=2")  # work in flight at every update
    arguments = ["--policy", "per-episode+interrupt", "--steps", "6"]
    report = train_checked(log, arguments, (*small, *lag))
    assert report["episodes_interrupted"] > 0 and report["episodes_failed"] == 0
    assert read_log(log)[0].config["weight_update"] == "interrupt"
