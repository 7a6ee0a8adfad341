"""AReaL's decoupled PPO objective (`is_correction=decoupled`) against a reference written
from its formula token by token in plain floats, and its reduction to the PPO clip."""

from __future__ import annotations

import math

import pytest
import torch

from rolloutlog.runtime.live.broadcast import WeightBroadcast
from rolloutlog.runtime.live.model import build_model
from rolloutlog.runtime.live.trainer import (
    GRPOTrainer,
    TrainerConfig,
    completion_logprobs,
    surrogate,
)
from tests.runtime.live.test_trainer import _fixed_batch

EPSILON, CAP = 0.2, 5.0
CONFIG = TrainerConfig(is_correction="decoupled", clip_epsilon=EPSILON, is_decoupled_cap=CAP)
# rows: episodes (one advantage each); columns: tokens; log-probabilities of each policy
CURRENT = [[-1.0, -0.3, -2.0, -0.1], [-0.5, -1.6, -0.05, -3.0]]
PROXIMAL = [[-1.1, -0.6, -1.9, -0.1], [-0.5, -1.2, -0.4, -3.2]]
BEHAVIOUR = [[-1.3, -0.4, -2.1, -2.0], [-0.2, -1.3, -0.3, -3.0]]  # [0][3]: weight e^1.9 > 5
ADVANTAGES = [1.5, -0.7]


def _reference(current: float, proximal: float, behaviour: float, advantage: float) -> float:
    """One token's term of the objective: the behaviour weight times PPO's pessimistic
    surrogate of the ratio to the proximal policy; no term where the weight passes the cap."""
    weight = math.exp(proximal - behaviour)
    if weight > CAP:
        return 0.0
    ratio = math.exp(current - proximal)
    bounded = min(max(ratio, 1.0 - EPSILON), 1.0 + EPSILON)
    return weight * min(ratio * advantage, bounded * advantage)


def _objective(config: TrainerConfig, behaviour: list[list[float]], proximal=None):
    current = torch.tensor(CURRENT, dtype=torch.float64, requires_grad=True)
    mask = torch.ones_like(current)
    objective, corrected = surrogate(
        current,
        torch.tensor(behaviour, dtype=torch.float64),
        torch.tensor(ADVANTAGES, dtype=torch.float64),
        mask,
        config,
        None if proximal is None else torch.tensor(proximal, dtype=torch.float64),
    )
    objective.sum().backward()
    assert current.grad is not None
    return objective.detach(), current.grad, corrected


def test_the_decoupled_objective_and_its_gradient_match_the_reference():
    objective, gradient, corrected = _objective(CONFIG, BEHAVIOUR, PROXIMAL)
    step = 1e-6
    for row, advantage in enumerate(ADVANTAGES):
        for column in range(len(CURRENT[0])):
            args = (PROXIMAL[row][column], BEHAVIOUR[row][column], advantage)
            at = CURRENT[row][column]
            expected = _reference(at, *args)
            slope = (_reference(at + step, *args) - _reference(at - step, *args)) / (2 * step)
            assert float(objective[row, column]) == pytest.approx(expected, abs=1e-9)
            assert float(gradient[row, column]) == pytest.approx(slope, abs=1e-6)
    # the clip binds somewhere (no gradient) and the cap masks exactly the one token
    assert (gradient == 0).sum() >= 2
    assert corrected.tolist() == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]


def test_with_behaviour_equal_to_proximal_it_is_the_plain_ppo_clip():
    plain = TrainerConfig(clip_epsilon=EPSILON)
    expected, expected_gradient, _ = _objective(plain, PROXIMAL)
    objective, gradient, corrected = _objective(CONFIG, PROXIMAL, PROXIMAL)
    assert torch.allclose(objective, expected) and torch.allclose(gradient, expected_gradient)
    assert corrected.sum() == 0.0
    # behaviour = proximal = current: every ratio is 1, the objective is the advantage
    same, _, _ = _objective(CONFIG, CURRENT, CURRENT)
    assert same.tolist() == [[a] * len(CURRENT[0]) for a in ADVANTAGES]


def test_by_default_the_proximal_policy_is_the_current_one_at_the_step_start():
    """The trainer's single step: u = 1 in value, the gradient is w·A·∇logp_θ."""
    objective, gradient, _ = _objective(CONFIG, BEHAVIOUR)
    weights = torch.exp(torch.tensor(CURRENT) - torch.tensor(BEHAVIOUR)).double()
    inside = (weights <= CAP).double()
    advantages = torch.tensor(ADVANTAGES, dtype=torch.float64).unsqueeze(1)
    assert torch.allclose(objective, weights * advantages * inside)
    assert torch.allclose(gradient, weights * advantages * inside)


def test_minibatches_train_consecutive_slices_against_the_arrival_weights(tmp_path):
    """`minibatches = 2`: two optimizer steps, each slice's proximal logprobs those of the
    weights the batch arrived at; the same two steps taken by hand give the same weights."""
    config = TrainerConfig(is_correction="decoupled", minibatches=2, learning_rate=1e-2)
    batch = _fixed_batch()[:5]
    trainer = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path / "a"), config)
    by_hand = GRPOTrainer(build_model(seed=0), WeightBroadcast(tmp_path / "b"), config)
    arrival = completion_logprobs(by_hand.model, batch)
    _, before = by_hand.loss(batch)
    report = trainer.train_step(batch)
    for first, end in ((0, 2), (2, 5)):  # sizes 2 and 3
        loss, parts = by_hand.loss(batch[first:end], arrival[first:end])
        if first == 2:  # the weights moved: the clip around the proximal policy binds
            now = completion_logprobs(by_hand.model, batch[first:end])
            drift = [abs(math.exp(c - a) - 1) for cs, as_ in zip(now, arrival[first:end],
                     strict=True) for c, a in zip(cs, as_, strict=True)]  # fmt: skip
            assert max(drift) > config.clip_epsilon
            unclipped = by_hand.loss(batch[first:end])[1]["policy_loss"]
            assert parts["policy_loss"] != pytest.approx(unclipped, abs=1e-6)
        by_hand.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(by_hand.model.parameters(), config.max_grad_norm)
        by_hand.optimizer.step()
    for mine, theirs in zip(trainer.model.parameters(), by_hand.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    # the diagnostics are the ratio at the batch's arrival, over the whole batch
    for key in ("ratio_mean", "ratio_ess", "clip_fraction", "kl_behaviour"):
        assert getattr(report, key) == pytest.approx(before[key], abs=1e-6)
    assert report.tokens == int(before["tokens"]) and report.episodes == 5
