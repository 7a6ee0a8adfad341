"""Small rules the reference states in its own words: age, staleness, the task source,
the curricula and GRPO advantages (docs/concepts.md, docs/deciders.md)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from rolloutlog.testing.reference.settings import Settings

ZERO = 1e-9  # |advantage| at or below this teaches nothing and is pruned


def age(dispatch_version: int, step: int) -> int:
    """Batch `step` trains on version `step - 1`; the age is how far behind that the
    episode's own dispatch version is."""
    return step - 1 - dispatch_version


def past_bound(settings: Settings, train: bool, frozen: bool, version: int, step: int) -> bool:
    """Only train work of the policy being trained goes stale, past `max_off_policy_steps`."""
    if not train or frozen:
        return False
    return age(version, step) > settings.max_off_policy_steps


def advantages(rewards: Sequence[float]) -> tuple[float, ...]:
    """reward − mean; exact zeros when every reward is the same (a lone member included)."""
    if all(r == rewards[0] for r in rewards):
        return tuple(0.0 for _ in rewards)
    mean = statistics.fmean(rewards)
    return tuple(r - mean for r in rewards)


def admits(settings: Settings, rewards: Sequence[float]) -> bool:
    """The built-in curricula: `all` admits every scored group, `informative` those with
    at least two different rewards."""
    if settings.curriculum == "all":
        return True
    if settings.curriculum == "informative":
        return len(set(rewards)) >= 2
    raise ValueError(f"the reference model knows no curriculum {settings.curriculum!r}")


_BITS = 64
_WORD = 2**_BITS


def _mix(x: int) -> int:
    """splitmix64, written out: add the golden gamma, then two xor-shift-multiply rounds."""
    x = (x + 0x9E3779B97F4A7C15) % _WORD
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % _WORD
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % _WORD
    return x ^ (x >> 31)


def _draw(seed: int, number: int, stream: int) -> int:
    return _mix(_mix(_mix(seed % _WORD) ^ number) ^ stream)


def task(settings: Settings, number: int, work: str) -> tuple[str, str, bool]:
    """(task id, env, frozen) of group `g<number>`: streams 0 (task), 1 (frozen), 2 (eval)."""
    if work == "eval":
        return f"eval-{_draw(settings.seed, number, 2) % settings.tasks}", "eval", False
    task_id = f"t{_draw(settings.seed, number, 0) % settings.tasks}"
    if _draw(settings.seed, number, 1) < settings.frozen_fraction * _WORD:
        return task_id, "frozen", True
    return task_id, "main", False
