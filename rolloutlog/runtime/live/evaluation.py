"""Held-out evaluation: the policy under training scored on a fixed set of digit tasks.

Why: the training batch's own reward depends on which episodes a policy lets through
(a preset that drops slow rollouts trains fewer hard tasks and scores higher per batch);
a fixed set, disjoint from every training task (`digits.held_out_tasks`), scored by the
trainer's weights, compares policies on the same questions.

Each evaluation decodes every task twice from the trainer's model, on the trainer's
thread right after a step: greedily (argmax; the same weights give the same score) and
sampled at the run's temperature from a generator seeded by (run seed, step), so a rerun
scores the same too. Tasks of one digit count share a prompt length and are decoded as
one batch, `max_tokens` steps, each completion cut after its first EOS (as inference stops
there).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from rolloutlog.runtime.live.digits import EOS_ID, DigitTask, reward
from rolloutlog.runtime.live.model import LlamaForCausalLM


def completions(
    model: LlamaForCausalLM,
    tasks: Sequence[DigitTask],
    *,
    temperature: float,
    generator: torch.Generator | None,
) -> list[list[int]]:
    """Each task's completion, in order: greedy when `generator` is None or the temperature
    is 0, otherwise sampled with `generator`."""
    answers: dict[str, list[int]] = {}
    by_length: dict[int, list[DigitTask]] = {}
    for task in tasks:
        by_length.setdefault(len(task.digits), []).append(task)
    with torch.no_grad():
        for group in by_length.values():
            tokens = torch.tensor([task.prompt_ids for task in group])
            prompt = tokens.shape[1]
            for _ in range(group[0].max_tokens):
                logits = model(tokens)[:, -1].float()
                if generator is None or temperature <= 0.0:
                    chosen = logits.argmax(dim=-1)
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    chosen = torch.multinomial(probs, 1, generator=generator).squeeze(1)
                tokens = torch.cat([tokens, chosen.unsqueeze(1)], dim=1)
            for task, row in zip(group, tokens[:, prompt:].tolist(), strict=True):
                answers[task.task_id] = row[: row.index(EOS_ID) + 1] if EOS_ID in row else row
    return [answers[task.task_id] for task in tasks]


def evaluate(
    model: LlamaForCausalLM,
    tasks: Sequence[DigitTask],
    *,
    step: int,
    seed: int,
    temperature: float,
) -> dict[str, Any]:
    """One evaluation row: mean reward greedy and sampled, overall and per difficulty."""
    started = time.thread_time()
    was_training = model.training
    model.eval()
    try:
        greedy = completions(model, tasks, temperature=temperature, generator=None)
        generator = torch.Generator().manual_seed(_sample_seed(seed, step))
        sampled = completions(model, tasks, temperature=temperature, generator=generator)
    finally:
        model.train(was_training)
    row: dict[str, Any] = {"step": step}
    for name, answers in (("greedy", greedy), ("sampled", sampled)):
        rewards = [reward(task, answer) for task, answer in zip(tasks, answers, strict=True)]
        row[name] = round(statistics.fmean(rewards), 6)
        row[f"{name}_by_difficulty"] = {
            difficulty: round(statistics.fmean(of), 6)
            for difficulty in sorted({task.difficulty for task in tasks})
            if (
                of := [r for r, t in zip(rewards, tasks, strict=True) if t.difficulty == difficulty]
            )
        }
    row["cpu_s"] = round(time.thread_time() - started, 4)
    return row


def _sample_seed(seed: int, step: int) -> int:
    digest = hashlib.sha256(f"eval:{seed}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
