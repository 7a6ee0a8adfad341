"""The GRPO trainer: its loss, its broadcast, and a short check that it learns the task."""

from __future__ import annotations

import json
import math

import attrs
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
    ratio_diagnostics,
    surrogate,
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


def _gradient(
    differences: list[list[float]], advantages: list[float], config: TrainerConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """d loss / d logp_θ per token for logp_θ − logp_behaviour = `differences`, and the
    corrected tokens; the loss is minus the mean of the surrogate over every token."""
    logprobs = torch.tensor(differences, requires_grad=True)
    behaviour = torch.zeros_like(logprobs)
    mask = torch.ones_like(logprobs)
    objective, corrected = surrogate(logprobs, behaviour, torch.tensor(advantages), mask, config)
    (-(objective * mask).sum() / mask.sum()).backward()
    assert logprobs.grad is not None
    return logprobs.grad, corrected


def test_tis_weights_each_token_by_its_ratio_capped_at_c():
    ratios = [0.5, 1.0, 3.0]  # trainer over behaviour probability
    differences = [[float(torch.log(torch.tensor(r))) for r in ratios]]
    gradient, corrected = _gradient(
        differences, [1.0], TrainerConfig(is_correction="tis", is_cap=2.0)
    )
    # gradient of −mean(w·logp·A) with w = min(r, C) detached: no PPO clip at 0.5 or 3
    assert gradient.tolist()[0] == pytest.approx([-0.5 / 3, -1.0 / 3, -2.0 / 3], rel=1e-5)
    assert corrected.tolist() == [[0.0, 0.0, 1.0]]
    # a negative advantage pushes the other way, with the same weights
    gradient, _ = _gradient(differences, [-2.0], TrainerConfig(is_correction="tis", is_cap=2.0))
    assert gradient.tolist()[0] == pytest.approx([1.0 / 3, 2.0 / 3, 4.0 / 3], rel=1e-5)


def test_mask_drops_the_tokens_outside_the_band_and_keeps_both_ends():
    low, high = -0.5, 0.5  # log ratios; the band is [exp(-0.5), exp(0.5)], ends inclusive
    band = (float(torch.exp(torch.tensor(low))), float(torch.exp(torch.tensor(high))))
    config = TrainerConfig(is_correction="mask", is_band=band)
    # A > 0 at the low end and A < 0 at the high end: where the PPO clip lets gradient through
    differences = [[low, low - 1e-3], [high, high + 1e-3]]
    gradient, corrected = _gradient(differences, [1.0, -1.0], config)
    assert gradient[0, 0] == pytest.approx(-band[0] / 4, rel=1e-5)  # at low: trains
    assert gradient[1, 0] == pytest.approx(band[1] / 4, rel=1e-5)  # at high: trains
    assert gradient[0, 1] == 0.0 and gradient[1, 1] == 0.0  # just outside: no gradient
    assert corrected.tolist() == [[0.0, 1.0], [0.0, 1.0]]
    # without the mask, the same tokens outside the band would train
    plain, none_corrected = _gradient(differences, [1.0, -1.0], TrainerConfig())
    assert plain[0, 1] != 0.0 and plain[1, 1] != 0.0
    assert none_corrected.sum() == 0.0


def _gradients(trainer: GRPOTrainer, samples: list[TrainSample]) -> list[torch.Tensor]:
    trainer.model.zero_grad(set_to_none=False)
    loss, _ = trainer.loss(samples)
    loss.backward()  # type: ignore[no-untyped-call]
    return [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]


def test_tokens_outside_the_gradient_mask_carry_no_gradient_but_stay_in_the_mean(tmp_path):
    """A fully masked sample adds nothing to the gradient, only its tokens to the mean;
    a partly masked one trains on its unmasked tokens only."""
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path))
    kept, other = _fixed_batch()[:2]
    masked = attrs.evolve(other, gradient_mask=(False,) * len(other.completion_ids))
    alone, together = _gradients(trainer, [kept]), _gradients(trainer, [kept, masked])
    share = len(kept.completion_ids) / (len(kept.completion_ids) + len(other.completion_ids))
    for a, b in zip(alone, together, strict=True):
        assert torch.allclose(b, a * share, atol=1e-6)
    half = (True,) * 2 + (False,) * (len(other.completion_ids) - 2)
    partly = _gradients(trainer, [kept, attrs.evolve(other, gradient_mask=half)])
    assert any(not torch.allclose(p, t, atol=1e-6) for p, t in zip(partly, together, strict=True))
    with pytest.raises(ValueError, match="gradient mask entries"):
        attrs.evolve(other, gradient_mask=(True,))


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
    curve = _learning_curve(tmp_path, TrainerConfig(learning_rate=3e-3), steps=50, lag=0)
    first, last = sum(curve[:10]) / 10, sum(curve[-10:]) / 10
    assert first < 0.15, curve
    assert last > first + 0.08, curve


@pytest.mark.parametrize("correction", ["tis", "mask"])
def test_each_correction_learns_from_stale_rollouts(tmp_path, correction):
    """Rollouts one version behind (inference reloads every other step), 50 steps: the
    corrected loss still lifts the reward well above the random policy's."""
    config = TrainerConfig(learning_rate=3e-3, is_correction=correction)
    curve = _learning_curve(tmp_path, config, steps=50, lag=1)
    first, last = sum(curve[:10]) / 10, sum(curve[-10:]) / 10
    assert first < 0.15, curve
    assert last > first + 0.05, curve


def _learning_curve(tmp_path, config: TrainerConfig, *, steps: int, lag: int) -> list[float]:
    """Mean reward per step; inference reloads the weights every `lag + 1` steps."""
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path), config)
    engine = Engine(build_model(seed=0)).start()
    tasks = [task_from_id(f"learn-{i}") for i in range(4)]
    curve = []
    try:
        engine.reload_weights(trainer.publish_initial())
        for step in range(steps):
            samples, rewards = _rollouts(engine, tasks, group_size=16, step=step)
            curve.append(sum(rewards) / len(rewards))
            report = trainer.train_step(samples)
            if step % (lag + 1) == lag:
                engine.reload_weights(report.weights_path)
    finally:
        engine.stop()
    return curve


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


def test_the_ratio_diagnostics_of_a_tiny_batch_with_known_ratios():
    ratios = [[1.0, 2.0, 0.5], [1.1, 4.0, 1.0]]  # π_θ/π_b; the last token is padding
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    figures = ratio_diagnostics(
        torch.log(torch.tensor(ratios)), torch.zeros(2, 3), mask, epsilon=0.2
    )
    kept = [1.0, 2.0, 0.5, 1.1, 4.0]
    assert figures["ratio_mean"] == pytest.approx(sum(kept) / 5)
    assert figures["ratio_ess"] == pytest.approx(sum(kept) ** 2 / (5 * sum(r * r for r in kept)))
    assert figures["clip_fraction"] == pytest.approx(3 / 5)  # 2, 0.5 and 4; 1.1 is inside
    k3 = [r - 1 - math.log(r) for r in kept]
    assert figures["kl_behaviour"] == pytest.approx(sum(k3) / 5)
    same = ratio_diagnostics(torch.zeros(2, 3), torch.zeros(2, 3), mask, epsilon=0.2)
    assert same == {"ratio_mean": 1.0, "ratio_ess": 1.0, "clip_fraction": 0.0,
                    "kl_behaviour": 0.0}  # fmt: skip


def test_a_step_reports_its_diagnostics_in_its_row(tmp_path):
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path))
    stale = [attrs.evolve(s, inference_logprobs=tuple(lp - 1.0 for lp in s.inference_logprobs))
             for s in _fixed_batch()]  # fmt: skip
    row = trainer.train_step(stale).row()
    assert row["ratio_mean"] == pytest.approx(math.e, rel=1e-4)
    assert row["ratio_ess"] == pytest.approx(1.0)  # every ratio equal
    assert row["kl_behaviour"] == pytest.approx(math.e - 2, rel=1e-4)  # e − 1 − log e
    assert row["clip_fraction"] == 1.0 and row["version"] == 1 and "weights_path" not in row
