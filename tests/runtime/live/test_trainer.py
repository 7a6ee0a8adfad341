"""The GRPO trainer: its loss, its broadcast, and a short check that it learns the task."""

from __future__ import annotations

import json

import pytest
import torch

from rolloutlog.runtime.live.broadcast import READY_FILE, BroadcastError, WeightBroadcast
from rolloutlog.runtime.live.digits import reward, task_from_id
from rolloutlog.runtime.live.model import WEIGHTS_FILE, build_model, load_checkpoint
from rolloutlog.runtime.live.trainer import (
    GRPOTrainer,
    TrainerConfig,
    TrainSample,
    completion_logprobs,
)
from rolloutlog.runtime.live.twin.engine import Engine, SamplingSpec


def _fixed_batch() -> list[TrainSample]:
    """Completions scored by the sorting reward, logprobs from the initial model."""
    model = build_model(seed=0)
    samples = []
    for index in range(16):
        task = task_from_id(f"fixed-{index}")
        answer = task.target_ids if index % 2 else list(reversed(task.target_ids))
        samples.append(
            TrainSample(
                prompt_ids=tuple(task.prompt_ids),
                completion_ids=tuple(answer),
                inference_logprobs=tuple(0.0 for _ in answer),
                advantage=reward(task, answer) - 0.5,
            )
        )
    logprobs = completion_logprobs(model, samples)
    return [
        TrainSample(
            prompt_ids=s.prompt_ids,
            completion_ids=s.completion_ids,
            inference_logprobs=tuple(lp),
            advantage=s.advantage,
        )
        for s, lp in zip(samples, logprobs, strict=True)
    ]


def test_a_train_step_lowers_the_loss_of_a_fixed_batch(tmp_path):
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path))
    batch = _fixed_batch()
    first, parts = trainer.loss(batch)
    assert parts["ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # same weights as inference
    losses = [trainer.train_step(batch).loss for _ in range(5)]
    assert losses[0] == pytest.approx(float(first.detach()), abs=1e-5)
    assert losses[-1] < losses[0] - 0.01, losses
    assert trainer.version == 5


def test_the_ratio_is_clipped_against_the_inference_logprobs(tmp_path):
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path))
    stale = [
        TrainSample(
            prompt_ids=s.prompt_ids,
            completion_ids=s.completion_ids,
            inference_logprobs=tuple(lp - 1.0 for lp in s.inference_logprobs),
            advantage=s.advantage,
        )
        for s in _fixed_batch()
    ]
    _, parts = trainer.loss(stale)
    assert parts["ratio_mean"] == pytest.approx(torch.e, rel=1e-4)
    assert parts["clip_fraction"] == pytest.approx(1.0)


def test_each_step_publishes_a_ready_checkpoint_that_inference_can_load(tmp_path):
    broadcast = WeightBroadcast(tmp_path, keep=2)
    trainer = GRPOTrainer(build_model(seed=0), broadcast)
    assert trainer.publish_initial() == tmp_path / "v0"
    reports = [trainer.train_step(_fixed_batch()) for _ in range(3)]
    assert [r.version for r in reports] == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v2", "v3"]  # keep=2
    path = broadcast.require_ready(3)
    assert json.loads((path / READY_FILE).read_text())["version"] == 3
    assert sorted(p.name for p in path.iterdir()) == sorted(
        ["config.json", WEIGHTS_FILE, READY_FILE]
    )
    reloaded = load_checkpoint(path)
    tokens = torch.tensor([task_from_id("reload").prompt_ids])
    with torch.no_grad():
        assert torch.equal(reloaded(tokens), trainer.model(tokens))


def test_a_partial_or_tampered_version_is_refused(tmp_path):
    broadcast = WeightBroadcast(tmp_path)
    path = broadcast.publish(build_model(seed=0), 1)
    (path / READY_FILE).unlink()
    with pytest.raises(BroadcastError, match="not ready"):
        broadcast.require_ready(1)
    path = broadcast.publish(build_model(seed=0), 2)
    (path / WEIGHTS_FILE).write_bytes((path / WEIGHTS_FILE).read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(BroadcastError, match="does not match"):
        broadcast.require_ready(2)


def test_engine_and_trainer_learn_the_task_on_a_few_prompts(tmp_path):
    """A short, small run (4 prompts, groups of 16, 50 steps, ~12 s): the reward must rise
    well above the random policy's. The full 0.1 -> 0.8 run is a benchmark, not this test."""
    trainer = GRPOTrainer(
        build_model(seed=0), WeightBroadcast(tmp_path), TrainerConfig(learning_rate=3e-3)
    )
    engine = Engine(build_model(seed=0)).start()
    tasks = [task_from_id(f"learn-{i}") for i in range(4)]
    curve = []
    try:
        engine.reload_weights(trainer.publish_initial())
        for step in range(50):
            samples, rewards = _rollouts(engine, tasks, group_size=16, step=step)
            curve.append(sum(rewards) / len(rewards))
            engine.reload_weights(trainer.train_step(samples).weights_path)
    finally:
        engine.stop()
    first, last = sum(curve[:10]) / 10, sum(curve[-10:]) / 10
    assert first < 0.15, curve
    assert last > first + 0.08, curve


def _rollouts(
    engine: Engine, tasks: list, group_size: int, step: int
) -> tuple[list[TrainSample], list[float]]:
    requests = [
        (task, engine.submit(
            f"{step}/{task.task_id}/{member}",
            task.prompt_ids,
            SamplingSpec(max_tokens=task.max_tokens, seed=step * 10_000 + index * 100 + member,
                         logprobs=0),
        ))
        for index, task in enumerate(tasks)
        for member in range(group_size)
    ]  # fmt: skip
    for _, request in requests:
        if not request.done.wait(30):
            raise TimeoutError("the engine did not finish a rollout in 30 s")
    rewards = [reward(task, request.output) for task, request in requests]
    samples = []
    for start in range(0, len(requests), group_size):
        group = rewards[start : start + group_size]
        mean = sum(group) / len(group)
        for (task, request), value in zip(requests[start : start + group_size], group, strict=True):
            samples.append(
                TrainSample(
                    prompt_ids=tuple(task.prompt_ids),
                    completion_ids=tuple(request.output),
                    inference_logprobs=tuple(s.logprob for s in request.sampled),
                    advantage=value - mean,
                )
            )
    return samples, rewards
