"""Sampling one next token per row, with per-row parameters, and vLLM's logprob conventions.

Why per-row uniforms: every request owns a `torch.Generator` seeded from its `seed`, and
draws exactly one uniform per sampled token. A token then depends only on the request's
seed and its own logits, never on which other requests shared the batch, which is what
makes "same seed, same tokens" hold under continuous batching.

Logprobs follow vLLM's default `logprobs_mode="raw_logprobs"`: the log-softmax of the raw
logits, before temperature, top-k and top-p. With temperature 1 and no truncation (the RL
setting) they are exactly the sampling distribution, and they are what the trainer
recomputes for the importance ratio.
"""

from __future__ import annotations

from typing import Final

import attrs
import torch

GREEDY_TEMPERATURE: Final = 1e-5  # vLLM treats temperatures below this as greedy
LOGPROB_FLOOR: Final = -9999.0  # vLLM clamps logprobs to this before sending them


@attrs.frozen(kw_only=True)
class RowParams:
    """The sampling knobs of one row; `uniform` is that row's random draw (unused if greedy)."""

    temperature: float
    top_p: float
    top_k: int
    uniform: float


def sample_tokens(logits: torch.Tensor, rows: list[RowParams]) -> torch.Tensor:
    """One token id per row of `logits [B, V]`, by inverse-CDF sampling of its own uniform."""
    if logits.shape[0] != len(rows):
        raise ValueError(f"{logits.shape[0]} rows of logits but {len(rows)} row parameters")
    temperatures = torch.tensor([max(r.temperature, GREEDY_TEMPERATURE) for r in rows])
    probs = torch.softmax(logits.float() / temperatures.unsqueeze(1), dim=-1)
    probs = _truncate_top_k(probs, [r.top_k for r in rows])
    probs = _truncate_top_p(probs, [r.top_p for r in rows])
    cdf = probs.cumsum(dim=-1)
    targets = torch.tensor([r.uniform for r in rows]).unsqueeze(1) * cdf[:, -1:]
    sampled = torch.searchsorted(cdf, targets).squeeze(1).clamp(max=logits.shape[1] - 1)
    greedy = torch.tensor([r.temperature < GREEDY_TEMPERATURE for r in rows])
    return torch.where(greedy, logits.argmax(dim=-1), sampled)


def _truncate_top_k(probs: torch.Tensor, top_ks: list[int]) -> torch.Tensor:
    if all(k <= 0 or k >= probs.shape[1] for k in top_ks):
        return probs
    ks = torch.tensor([k if 0 < k < probs.shape[1] else probs.shape[1] for k in top_ks])
    kth = probs.sort(dim=-1, descending=True).values.gather(1, (ks - 1).unsqueeze(1))
    return torch.where(probs >= kth, probs, torch.zeros_like(probs))


def _truncate_top_p(probs: torch.Tensor, top_ps: list[float]) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches `top_p` (ties kept)."""
    if all(p >= 1.0 for p in top_ps):
        return probs
    ordered = probs.sort(dim=-1, descending=True).values
    normalised = ordered / ordered.sum(dim=-1, keepdim=True)
    mass_before = normalised.cumsum(dim=-1) - normalised
    keep = mass_before < torch.tensor(top_ps).unsqueeze(1)
    threshold = torch.where(keep, ordered, torch.full_like(ordered, float("inf"))).min(dim=-1)
    return torch.where(probs >= threshold.values.unsqueeze(1), probs, torch.zeros_like(probs))


@attrs.frozen(kw_only=True)
class TokenLogprob:
    """A candidate token's raw logprob and 1-based rank (1 = most likely), as vLLM reports."""

    token_id: int
    logprob: float
    rank: int


def sampled_logprobs(logprobs: torch.Tensor, tokens: torch.Tensor) -> list[TokenLogprob]:
    """The sampled token of each row with its logprob (floored at -9999) and rank."""
    chosen = logprobs.gather(1, tokens.unsqueeze(1))
    ranks = (logprobs > chosen).sum(dim=1) + 1
    values = chosen.squeeze(1).clamp(min=LOGPROB_FLOOR)
    return [
        TokenLogprob(token_id=int(t), logprob=float(v), rank=int(r))
        for t, v, r in zip(tokens.tolist(), values.tolist(), ranks.tolist(), strict=True)
    ]


def top_logprobs(row: torch.Tensor, sampled: TokenLogprob, count: int) -> list[TokenLogprob]:
    """vLLM's `top_logprobs` order: the sampled token first, then the top `count` by rank.

    So `count` entries when the sampled token is among the top `count`, `count + 1` otherwise.
    """
    entries = [sampled]
    if count <= 0:
        return entries
    values, ids = row.topk(min(count, row.shape[0]))
    for rank, (value, token) in enumerate(zip(values.tolist(), ids.tolist(), strict=True), 1):
        if token != sampled.token_id:
            entries.append(
                TokenLogprob(token_id=token, logprob=max(value, LOGPROB_FLOOR), rank=rank)
            )
    return entries
