"""The GRPO trainer: one clipped policy-gradient step per shipped batch, then a broadcast.

Loss, per completion token t of episode i (advantage A_i from the sink's group scoring):
    ratio = exp(logp_θ(t) − logp_inference(t))
    loss  = −mean_t min(ratio·A_i, clip(ratio, 1 − ε, 1 + ε)·A_i) − β·mean_t entropy_θ(t)
Why these choices:
- The ratio is taken against the logprobs that inference reported for the tokens it
  sampled, not a recomputation: with asynchronous rollouts those tokens come from an older
  policy (the rollout age), and the ratio is the importance weight that corrects for it;
  the clip bounds how far one stale episode can push the update.
- The mean is over all completion tokens of the batch (not per sequence first), so long
  and short answers weigh the same per token.
- A small entropy bonus (β = 0.02 by default) keeps a model trained from scratch
  exploring; without it the digit task collapses onto repeating one digit near reward 0.5.
Corrections for stale tokens (`TrainerConfig.is_correction`, `--set live.is_correction`),
with r = ratio above, taken from the behaviour logprobs inference returned:
- `none` (default): the clipped surrogate above.
- `tis`: truncated importance sampling; the surrogate is sg(min(r, C))·e^(logp_θ −
  sg(logp_θ))·A_i, worth min(r, C)·A_i with gradient min(r, C)·A_i·∇logp_θ: the weight
  is the ratio capped at C (`is_cap`) and detached, and no PPO clip applies.
- `mask`: the clipped surrogate, but a token whose r lies outside the band
  [low, high] (`is_band_low`, `is_band_high`, both ends inclusive: a token at exactly
  `low` trains) carries no gradient, as IcePop and MIS do; it stays in the token mean.
- `decoupled`: AReaL's decoupled PPO objective, with three policies: behaviour π_b (the
  logprobs inference returned), proximal π_prox, current π_θ. Per token,
      w = sg(π_prox / π_b), u = π_θ / π_prox,
      objective = w · min(u·A_i, clip(u, 1 − ε, 1 + ε)·A_i),
  and a token whose w exceeds `is_decoupled_cap` carries no gradient (it stays in the
  token mean): the trust region is taken around the proximal policy, and the staleness
  is corrected by the detached behaviour weight alone. AReaL (inclusionAI/AReaL at commit
  4aef98d8d818af55b43621aaadba047ae10f4e77) computes this in
  `areal/utils/functional/functional.py:429-559` (`ppo_actor_loss_fn`: the ratio against
  `proximal_logprobs`, the clip, then `pg_loss * behave_imp_weight`), the weight
  π_prox/π_b and its token mask in `apply_rejection_sampling` (same file, 185-426); its
  proximal policy is the recomputed logprob of the trainer's weights before the update
  (`compute_logp`, `areal/trainer/ppo/actor.py:129-139`, read by the loss as `prox_logp`
  at 176-191; "one training step behind current policy" in the docstring of
  `compute_prox_logp_approximations`, 604-684), and the cap is its former default
  `behave_imp_weight_cap=5.0` in token-mask mode (`areal/api/cli_args.py:1555-1571`; at
  that commit the default `rejection_sampling=None` applies no weight w at all). This
  trainer's proximal policy is likewise its weights when the batch arrives. With one
  optimizer step per batch (`minibatches = 1`) u = 1 in value and the clip never binds:
  the objective is then w·A·logp_θ, masked past the cap. With `minibatches = n` the batch
  trains as n optimizer steps on consecutive slices (AReaL's `ppo_n_minibatches`), the
  proximal logprobs computed once before the first, so the later slices are clipped
  around π_prox while w still corrects for the behaviour policy.
Every correction takes the ratio in its diagnostics (`ratio_diagnostics`) at the batch's
arrival. A sample's `gradient_mask` (tokens of versions past the bound, in interrupt mode) removes
its masked tokens from both terms, policy and entropy; they too stay in the token mean.
Each step publishes version `k` to the broadcast directory and returns it; the runtime then
announces it (`version_pending`) and makes it live.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, cast

import attrs
import torch
from torch.nn import functional

from rolloutlog.runtime.live.broadcast import WeightBroadcast
from rolloutlog.runtime.live.digits import PAD_ID
from rolloutlog.runtime.live.episodes import TrainSample
from rolloutlog.runtime.live.model import LlamaForCausalLM, load_weights_into

Correction = Literal["none", "tis", "mask", "decoupled"]


@attrs.frozen(kw_only=True)
class TrainerConfig:
    """Optimisation knobs; the defaults learn the digit task in a few hundred steps."""

    learning_rate: float = 5e-4
    clip_epsilon: float = 0.2
    entropy_coefficient: float = 0.02
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    is_correction: Correction = "none"
    is_cap: float = 2.0
    is_band: tuple[float, float] = (0.5, 2.0)
    is_decoupled_cap: float = 5.0
    minibatches: int = 1  # optimizer steps per batch, on consecutive slices


@attrs.frozen(kw_only=True)
class StepReport:
    """What one step did: the version it published and the loss terms, for the display."""

    version: int
    weights_path: Path
    loss: float
    policy_loss: float
    entropy: float
    clip_fraction: float
    ratio_mean: float
    episodes: int
    tokens: int
    duration_s: float
    corrected_fraction: float = 0.0  # tokens capped (tis) or masked (mask, decoupled)
    ratio_ess: float = 1.0  # `ratio_diagnostics`
    kl_behaviour: float = 0.0

    def row(self) -> dict[str, float | int]:
        """The step's figures as a row of the run's report (no path: it names scratch)."""
        return {
            key: round(value, 6) if isinstance(value, float) else value
            for key, value in attrs.asdict(self).items()
            if key != "weights_path"
        }


@attrs.frozen
class _Batch:
    tokens: torch.Tensor  # [B, L] prompt + completion, right-padded
    mask: torch.Tensor  # [B, L-1] 1 where position p predicts a completion token
    old_logprobs: torch.Tensor  # [B, L-1] inference logprobs at those positions
    advantages: torch.Tensor  # [B]
    gradient: torch.Tensor  # [B, L-1] 1 where a completion token carries gradient
    proximal: torch.Tensor | None  # [B, L-1] `decoupled`'s proximal logprobs, if given


def _collate(
    samples: Sequence[TrainSample], proximal: Sequence[Sequence[float]] | None = None
) -> _Batch:
    length = max(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    tokens = torch.full((len(samples), length), PAD_ID, dtype=torch.long)
    mask = torch.zeros(len(samples), length - 1)
    old = torch.zeros(len(samples), length - 1)
    gradient = torch.zeros(len(samples), length - 1)
    anchor = None if proximal is None else torch.zeros(len(samples), length - 1)
    for row, sample in enumerate(samples):
        sequence = sample.prompt_ids + sample.completion_ids
        tokens[row, : len(sequence)] = torch.tensor(sequence)
        start, end = len(sample.prompt_ids) - 1, len(sequence) - 1
        mask[row, start:end] = 1.0
        old[row, start:end] = torch.tensor(sample.inference_logprobs)
        carries = sample.gradient_mask
        gradient[row, start:end] = 1.0 if carries is None else torch.tensor(carries).float()
        if anchor is not None and proximal is not None:
            anchor[row, start:end] = torch.tensor(proximal[row])
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    return _Batch(tokens, mask, old, advantages, gradient, anchor)


def surrogate(
    logprobs: torch.Tensor,
    behaviour: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: TrainerConfig,
    proximal: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-token objective to maximise (module docstring), and the tokens corrected.

    All `[B, L-1]` but `advantages` (`[B]`); `mask` is 1 on completion tokens. The second
    tensor is 1 where `tis` capped the ratio or `mask` or `decoupled` masked the token (0
    under `none`). `proximal` is `decoupled`'s proximal logprobs (default: `logprobs`
    detached, the weights at the step's start); the other corrections ignore it.
    """
    advantage = advantages.unsqueeze(1)
    if config.is_correction == "decoupled":
        anchor = logprobs.detach() if proximal is None else proximal.detach()
        weight = torch.exp(anchor - behaviour) * mask
        inside = (weight <= config.is_decoupled_cap).float()
        clipped = _clipped(torch.exp(logprobs - anchor) * mask, advantage, config.clip_epsilon)
        return weight * clipped * inside, (1.0 - inside) * mask
    ratio = torch.exp(logprobs - behaviour) * mask
    if config.is_correction == "tis":
        weight = ratio.detach().clamp(max=config.is_cap)
        corrected = (ratio.detach() > config.is_cap).float() * mask
        unit = torch.exp(logprobs - logprobs.detach()) * mask  # 1, with the gradient of logp
        return weight * unit * advantage, corrected
    clipped = _clipped(ratio, advantage, config.clip_epsilon)
    if config.is_correction == "mask":
        low, high = config.is_band
        inside = ((ratio.detach() >= low) & (ratio.detach() <= high)).float()
        return clipped * inside, (1.0 - inside) * mask
    return clipped, torch.zeros_like(mask)


def _clipped(ratio: torch.Tensor, advantage: torch.Tensor, epsilon: float) -> torch.Tensor:
    """PPO's pessimistic surrogate: min(r·A, clip(r, 1 − ε, 1 + ε)·A)."""
    return torch.minimum(ratio * advantage, ratio.clamp(1 - epsilon, 1 + epsilon) * advantage)


def ratio_diagnostics(
    logprobs: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor, epsilon: float
) -> dict[str, float]:
    """How far the trained policy has moved from the one that sampled, over the tokens of
    `mask`, with r = π_θ/π_b per token at the step's start:
    - `ratio_mean`: the mean of r (1 in expectation under π_b, whatever the staleness);
    - `ratio_ess`: the effective sample size of the weights r as a share of the tokens,
      (Σr)² / (n·Σr²), 1 when every r is equal, near 1/n when one token dominates;
    - `clip_fraction`: the share of tokens with |r − 1| > ε, outside PPO's clip band;
    - `kl_behaviour`: KL(π_b ‖ π_θ) estimated from the sampled tokens by the mean of
      r − 1 − log r (Schulman's k3: unbiased under π_b and never negative).
    """
    tokens = mask.sum().clamp(min=1.0)
    log_ratio = (logprobs - behaviour) * mask
    ratio = torch.exp(log_ratio) * mask
    squares = (ratio * ratio).sum()
    return {
        "ratio_mean": float(ratio.sum() / tokens),
        "ratio_ess": float(ratio.sum() ** 2 / (tokens * squares)) if squares > 0 else 1.0,
        "clip_fraction": float((((ratio - 1).abs() > epsilon).float() * mask).sum() / tokens),
        "kl_behaviour": float(((ratio - 1 - log_ratio) * mask).sum() / tokens),
    }


def completion_logprobs(
    model: LlamaForCausalLM, samples: Sequence[TrainSample]
) -> list[list[float]]:
    """The model's logprob of each completion token: the trainer's recomputation of what
    inference reported (equal for equal weights)."""
    batch = _collate(samples)
    with torch.no_grad():
        logprobs, _ = _token_logprobs(model, batch.tokens)
    return [
        logprobs[
            row, len(s.prompt_ids) - 1 : len(s.prompt_ids) + len(s.completion_ids) - 1
        ].tolist()
        for row, s in enumerate(samples)
    ]


def _token_logprobs(
    model: LlamaForCausalLM, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logprob of each next token and the entropy at each position, both `[B, L-1]`."""
    logits = model(tokens)[:, :-1].float()
    all_logprobs = functional.log_softmax(logits, dim=-1)
    chosen = all_logprobs.gather(2, tokens[:, 1:].unsqueeze(2)).squeeze(2)
    entropy = -(all_logprobs.exp() * all_logprobs).sum(dim=-1)
    return chosen, entropy


class GRPOTrainer:
    """Owns the policy and its optimizer; `train_step` trains on a batch and publishes."""

    def __init__(
        self,
        model: LlamaForCausalLM,
        broadcast: WeightBroadcast,
        config: TrainerConfig | None = None,
    ) -> None:
        self.model = model.train()
        self.broadcast = broadcast
        self.config = config or TrainerConfig()
        self.optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=self.config.learning_rate,
            weight_decay=self.config.weight_decay,
        )
        self.version = 0

    def publish_initial(self) -> Path:
        """Publish v0, the weights inference starts from."""
        return self.broadcast.publish(self.model, 0)

    def loss(
        self,
        samples: Sequence[TrainSample],
        proximal: Sequence[Sequence[float]] | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The clipped surrogate loss of the module docstring, and its parts; `proximal` is
        each sample's proximal logprobs (`decoupled`; default: the current weights')."""
        if not samples:
            raise ValueError("cannot compute a loss on an empty batch")
        batch = _collate(samples, proximal)
        logprobs, entropy = _token_logprobs(self.model, batch.tokens)
        objective, corrected = surrogate(
            logprobs, batch.old_logprobs, batch.advantages, batch.mask, self.config, batch.proximal
        )
        tokens = batch.mask.sum()  # masked tokens (`gradient` 0) stay in the token mean
        policy_loss = -(objective * batch.gradient).sum() / tokens
        mean_entropy = (entropy * batch.gradient).sum() / tokens
        loss = policy_loss - self.config.entropy_coefficient * mean_entropy
        parts = {
            "policy_loss": float(policy_loss.detach()),
            "entropy": float(mean_entropy.detach()),
            "corrected_fraction": float(corrected.sum() / tokens),
            "tokens": float(tokens),
            **ratio_diagnostics(
                logprobs.detach(), batch.old_logprobs, batch.mask, self.config.clip_epsilon
            ),
        }
        return loss, parts

    def train_step(
        self, samples: Sequence[TrainSample], *, version: int | None = None
    ) -> StepReport:
        """`minibatches` optimizer steps on `samples`, then publish as `version` (default:
        the next).

        The live driver passes the batch's step, so that `v_s` follows batch `s` even when
        an earlier batch trained nothing (versions may jump; they never go back).
        """
        version = self._next_version(version)
        started = time.perf_counter()
        slices = _slices(len(samples), self.config.minibatches)
        start = completion_logprobs(self.model, samples) if len(slices) > 1 else None
        terms = []
        for first, end in slices:
            loss, parts = self.loss(samples[first:end], None if start is None else start[first:end])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
            self.optimizer.step()
            terms.append({**parts, "loss": float(loss.detach())})
        parts = _token_mean(terms)
        if start is not None:  # the ratio at the batch's arrival, over the whole batch
            whole = _collate(samples, start)
            arrival = cast(torch.Tensor, whole.proximal)  # given: `start`
            epsilon = self.config.clip_epsilon
            parts.update(ratio_diagnostics(arrival, whole.old_logprobs, whole.mask, epsilon))
        self.version = version
        path = self.broadcast.publish(self.model, self.version)
        return StepReport(
            version=self.version,
            weights_path=path,
            loss=parts["loss"],
            policy_loss=parts["policy_loss"],
            entropy=parts["entropy"],
            clip_fraction=parts["clip_fraction"],
            ratio_mean=parts["ratio_mean"],
            episodes=len(samples),
            tokens=int(parts["tokens"]),
            duration_s=time.perf_counter() - started,
            corrected_fraction=parts["corrected_fraction"],
            ratio_ess=parts["ratio_ess"],
            kl_behaviour=parts["kl_behaviour"],
        )

    def publish_unchanged(self, version: int | None = None) -> StepReport:
        """Publish the current weights as `version` without a step.

        A shipped batch whose every episode was pruned (zero advantages) trains nothing,
        but its version must still appear: the gate and the ship hold wait for it.
        """
        version = self._next_version(version)
        started = time.perf_counter()
        self.version = version
        path = self.broadcast.publish(self.model, version)
        return _no_step(version, path, time.perf_counter() - started)

    def restore(self, version: int) -> None:
        """Resuming: continue from the published checkpoint of `version` (READY checked).

        The optimizer starts afresh: its moments are not checkpointed, and AdamW rebuilds
        them within a few steps.
        """
        load_weights_into(self.model, self.broadcast.require_ready(version))
        self.version = version

    def restored(self) -> StepReport:
        """The checkpoint a resumed run restarted from, reported as a step that trained
        nothing: its batch trained before the crash, and it is announced, not trained again."""
        return _no_step(self.version, self.broadcast.require_ready(self.version), 0.0)

    def _next_version(self, version: int | None) -> int:
        if version is None:
            return self.version + 1
        if version <= self.version:
            raise ValueError(f"version {version} does not follow the published v{self.version}")
        return version


def _slices(count: int, minibatches: int) -> list[tuple[int, int]]:
    """`minibatches` consecutive (start, end) slices of `count` samples, sizes differing by
    at most one; fewer when there are fewer samples."""
    parts = max(1, min(minibatches, count))
    bounds = [count * index // parts for index in range(parts + 1)]
    return list(itertools.pairwise(bounds))


def _token_mean(terms: Sequence[dict[str, float]]) -> dict[str, float]:
    """The parts of several slices as one: each weighted by its tokens; `tokens` summed."""
    tokens = sum(term["tokens"] for term in terms) or 1.0
    merged = {
        key: sum(term[key] * term["tokens"] for term in terms) / tokens
        for key in terms[0]
        if key != "tokens"
    }
    return {**merged, "tokens": sum(term["tokens"] for term in terms)}


def _no_step(version: int, path: Path, duration_s: float) -> StepReport:
    return StepReport(
        version=version,
        weights_path=path,
        loss=0.0,
        policy_loss=0.0,
        entropy=0.0,
        clip_fraction=0.0,
        ratio_mean=1.0,
        episodes=0,
        tokens=0,
        duration_s=duration_s,
    )
