"""The digit-sorting task: a task id names a list of 4 to 6 digits; the answer sorts them.

Why this task: it needs no download, a random model scores about 0.1 on it, a 0.4 M
parameter model can reach 0.8 in minutes on a CPU, and the reward (fraction of positions
right) is dense enough for GRPO to see progress from the first batches.

Token ids (the whole vocabulary, 16 ids so that shapes stay multiples of 8):
digits `0`-`9` are ids 0-9, then SEP, BOS, EOS, PAD; 14 and 15 are unused.
A prompt is `BOS d1 … dn SEP`; the ideal completion is the sorted digits, then EOS.

The hard tail (`live.hard_task_share`, 0 by default): a share of the task ids name 10 to 12
digits instead. They take twice the decode steps and are learned later, so a rule that
drops slow rollouts pays for it in reward. Which ids are hard is a hash of the id apart
from the one that draws the digits, so at share 0 every task is exactly what it was.

The held-out set (`held_out_tasks`, what `live.eval_every` scores): a digit sequence is
held out when a hash of the digits themselves falls below `HELD_OUT_SHARE`. A training
task that draws one draws again (from the same generator, with as many digits), and a
held-out task draws until it gets one, so no prompt is ever both: the two sets are
disjoint by construction, whatever the task ids, the seed or the hard share. The set
depends on its size and hard share alone (ids `held-out-<i>`, the first
round(size · share) of them hard), so every run and every seed scores the same tasks.
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
HARD_DIGITS_MIN: Final = 10
HARD_DIGITS_MAX: Final = 12
ENV_NAME: Final = "sort-digits"
HELD_OUT_SHARE: Final = 1 / 32  # of the digit sequences of each length


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
    def difficulty(self) -> str:
        """`hard` (the tail: more digits than an ordinary task ever has) or `easy`."""
        return "hard" if len(self.digits) > DIGITS_MAX else "easy"

    @property
    def max_tokens(self) -> int:
        """Room for every digit plus EOS: the target's length; longer answers score worse."""
        return len(self.digits) + 1


def task_from_id(task_id: str, hard_share: float = 0.0) -> DigitTask:
    """The task that `task_id` names: deterministic across processes and Python versions.

    The digits come from a `random.Random` seeded with the SHA-256 of the id, so the same id
    gives the same prompt in the driver, in replay and in any test, with no shared state.
    With `hard_share` > 0, the ids whose second draw (`_hard_draw`) falls below it are hard.
    A held-out digit sequence is drawn again (`is_held_out`).
    """
    if not task_id:
        raise ValueError("task_id must be a non-empty string")
    if not 0.0 <= hard_share <= 1.0:
        raise ValueError(f"hard_share must be in [0, 1], got {hard_share}")
    rng = random.Random(_hash64(task_id))
    hard = _hard_draw(task_id) < hard_share
    return DigitTask(task_id=task_id, digits=_draw(rng, hard, held_out=False))


def held_out_tasks(size: int, hard_share: float) -> tuple[DigitTask, ...]:
    """The fixed evaluation set: `size` tasks no training task can be (module docstring)."""
    if size < 1:
        raise ValueError(f"the held-out set needs at least one task, got {size}")
    if not 0.0 <= hard_share <= 1.0:
        raise ValueError(f"hard_share must be in [0, 1], got {hard_share}")
    hard = round(size * hard_share)
    return tuple(
        DigitTask(
            task_id=f"held-out-{index}",
            digits=_draw(random.Random(_hash64(f"held-out-{index}")), index < hard, held_out=True),
        )
        for index in range(size)
    )


def is_held_out(digits: Sequence[int]) -> bool:
    """Whether a digit sequence belongs to the held-out set's side (module docstring)."""
    return _hash64("held-out:" + "".join(map(str, digits))) / 2.0**64 < HELD_OUT_SHARE


def _draw(rng: random.Random, hard: bool, *, held_out: bool) -> tuple[int, ...]:
    """A digit count for the difficulty, then digits until their side is `held_out`."""
    if hard:
        count = rng.randint(HARD_DIGITS_MIN, HARD_DIGITS_MAX)
    else:
        count = rng.randint(DIGITS_MIN, DIGITS_MAX)
    while True:
        digits = tuple(rng.randrange(10) for _ in range(count))
        if is_held_out(digits) == held_out:
            return digits


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _hard_draw(task_id: str) -> float:
    """A uniform draw in [0, 1) per task id, independent of its digits' draw."""
    return _hash64(f"hard:{task_id}") / 2.0**64


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
