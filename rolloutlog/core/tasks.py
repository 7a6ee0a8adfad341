"""The task source: a deterministic, seeded sampler of task ids over the task set.

Which task a new group gets is a pure function of the config seed and the group's number,
so a decision never depends on anything outside the log and the config, and replay opens
the same groups on the same tasks.
"""

from __future__ import annotations

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Work

_MASK = (1 << 64) - 1
_TASK_STREAM = 0
_FROZEN_STREAM = 1
_EVAL_STREAM = 2


def splitmix64(x: int) -> int:
    """One step of splitmix64: a well-mixed 64-bit hash of `x`."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _draw(seed: int, number: int, stream: int) -> int:
    return splitmix64(splitmix64(splitmix64(seed & _MASK) ^ number) ^ stream)


@attrs.frozen
class Task:
    """What a new group works on: the task id, its environment and generation source."""

    task_id: str
    env: str
    frozen: bool


def task_for_group(config: RunConfig, number: int, work: Work) -> Task:
    """The task of group `g<number>`; a `frozen_fraction` of train groups use a frozen source."""
    if work == "eval":
        return Task(
            f"eval-{_draw(config.seed, number, _EVAL_STREAM) % config.tasks}", "eval", False
        )
    task_id = f"t{_draw(config.seed, number, _TASK_STREAM) % config.tasks}"
    frozen = _draw(config.seed, number, _FROZEN_STREAM) / 2.0**64 < config.frozen_fraction
    return Task(task_id, "frozen" if frozen else "main", frozen)


def task_index(task_id: str) -> int:
    """The index of a task id in the task set (`t17` and `eval-17` are both 17)."""
    return int(task_id.rpartition("-")[2] if "-" in task_id else task_id[1:])
