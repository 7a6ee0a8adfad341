"""`stale_tokens = mask` live (docs/runtime.md, "Weight updates and work in flight"): under
`weight_update = interrupt` the trainer gets, for each resumed episode, a gradient mask from
its tokens' versions, False exactly on the tokens sampled more than the bound before the
version the batch trains on: as many as the log's `batch_shipped.masked_tokens` count, and
those carry no gradient in the objective (tests/runtime/live/test_trainer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import BatchShipped
from rolloutlog.runtime.live.episodes import TrainSample
from rolloutlog.runtime.live.trainer import GRPOTrainer, StepReport
from rolloutlog.runtime.live.twin.launch import serve_in_thread
from tests.runtime.live.live_helpers import run_driver, train_checked, verified_summary

STEP_S = 0.01  # a decode step lasts at least this: updates find episodes mid-generation
MASK = {"weight_update": "interrupt", "stale_tokens": "mask"}


def test_the_trainer_gets_no_gradient_on_tokens_past_the_bound(
    tmp_path: Path, checkpoints: dict[str, Path]
) -> None:
    trained: list[tuple[int, TrainSample]] = []

    def prepare(trainer: GRPOTrainer) -> None:
        step = trainer.train_step

        def recorded(samples: Sequence[TrainSample], *, version: int) -> StepReport:
            trained.extend((version, sample) for sample in samples)
            return step(samples, version=version)

        trainer.train_step = recorded  # type: ignore[method-assign]

    twin = serve_in_thread(checkpoints["a"], min_step_s=STEP_S)
    try:
        overrides = {**MASK, "max_off_policy_steps": 0, "target_lag": 0}
        result, log = run_driver(
            tmp_path, [twin.url], steps=6, overrides=overrides, prepare=prepare
        )
    finally:
        twin.stop()
    assert result.finished_reason == "steps" and result.error is None
    summary = verified_summary(log)
    masked = sum(e.masked_tokens for e in read_log(log) if isinstance(e, BatchShipped))
    assert masked > 0 and summary["tokens_trained_masked"] == masked
    held = 0
    for step, sample in trained:  # it publishes v_step, training on v_{step − 1}
        versions = sample.token_versions or ()
        expected = tuple((step - 1) - v <= 0 for v in versions)
        assert sample.gradient_mask == (None if all(expected) else expected)
        held += sum(not carries for carries in expected)
    assert held == masked


def test_train_runs_per_episode_interrupt_with_masking_and_its_log_verifies(
    tmp_path: Path,
) -> None:
    log = tmp_path / "mask.arrow"
    small = ("group_size=4", "batch_size=16", "max_inflight=16", f"server_min_step_s={STEP_S}")
    arguments = ["--policy", "per-episode+interrupt", "--steps", "6"]
    report = train_checked(log, arguments, (*small, "stale_tokens=mask"))
    assert report["episodes_interrupted"] > 0
    assert read_log(log)[0].config["stale_tokens"] == "mask"
    assert report["tokens_trained_masked"] >= 0 and "tokens_trained_gradient" in report
