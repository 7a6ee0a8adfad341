"""The digit-sorting task: a task id names a list of 4 to 6 digits; the answer sorts them.

Why this task: it needs no download, a random model scores about 0.1 on it, a 0.4 M
parameter model can reach 0.8 in minutes on a CPU, and the reward (fraction of positions
right) is dense enough for GRPO to see progress from the first batches.

Token ids (the whole vocabulary, 16 ids so that shapes stay multiples of 8):
digits `0`-`9` are ids 0-9, then SEP, BOS, EOS, PAD; 14 and 15 are unused.
A prompt is `BOS d1 … dn SEP`; the ideal completion is the sorted digits, then EOS.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Final

import attrs

SEP_ID: Final = 10
BOS_ID: Final = 11
EOS_ID: Final = 12
PAD_ID: Final = 13
VOCAB_SIZE: Final = 16
DIGITS_MIN: Final = 4
DIGITS_MAX: Final = 6
ENV_NAME: Final = "sort-digits"


@attrs.frozen(kw_only=True)
class DigitTask:
    """One sorting problem: its id, its digits, and what the policy sees and must produce."""

    task_id: str
    digits: tuple[int, ...]

    @property
    def prompt_ids(self) -> list[int]:
        return [BOS_ID, *self.digits, SEP_ID]

    @property
    def target_ids(self) -> list[int]:
        return [*sorted(self.digits), EOS_ID]

    @property
    def max_tokens(self) -> int:
        """Room for every digit plus EOS: the target's length; longer answers score worse."""
        return len(self.digits) + 1


def task_from_id(task_id: str) -> DigitTask:
    """The task that `task_id` names: deterministic across processes and Python versions.

    The digits come from a `random.Random` seeded with the SHA-256 of the id, so the same id
    gives the same prompt in the driver, in replay and in any test, with no shared state.
    """
    if not task_id:
        raise ValueError("task_id must be a non-empty string")
    seed = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    count = rng.randint(DIGITS_MIN, DIGITS_MAX)
    return DigitTask(task_id=task_id, digits=tuple(rng.randrange(10) for _ in range(count)))


def reward(task: DigitTask, completion_ids: Sequence[int]) -> float:
    """Fraction of positions right, in [0, 1].

    The positions are those of the target, the sorted digits then EOS: position i is right
    when the completion's i-th token is the target's i-th token. Counting EOS as a position
    teaches the policy where to stop with the same signal as the digits; the denominator
    is the longer of completion and target, so both missing and extra tokens cost.
    """
    target = task.target_ids
    right = sum(1 for got, want in zip(completion_ids, target, strict=False) if got == want)
    return right / max(len(target), len(completion_ids))
