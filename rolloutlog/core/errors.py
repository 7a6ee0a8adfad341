"""Errors the core raises, each naming the seq of the event that could not be applied, and
the checks that raise them."""

from __future__ import annotations

from collections.abc import Container, MutableMapping, Sequence
from typing import Any


class InconsistentLogError(ValueError):
    """An event contradicts what the log said before it (an unknown group, a wrong step)."""

    def __init__(self, seq: int, kind: str, problem: str) -> None:
        super().__init__(f"seq {seq} ({kind}): {problem}")
        self.seq = seq
        self.kind = kind
        self.problem = problem


class LoopBoundError(RuntimeError):
    """The reaction loop exceeded a bound: a decider kept deciding and would never settle."""


class LoopFailedError(RuntimeError):
    """The loop was fed after a reaction failed half-way; its states hold part of it."""


def require(condition: bool, seq: int, kind: str, problem: str) -> None:
    """Raise `InconsistentLogError` unless `condition`; a check that survives `python -O`."""
    if not condition:
        raise InconsistentLogError(seq, kind, problem)


def require_held(
    episode_ids: Sequence[str], held: Container[str], seq: int, kind: str, where: str
) -> None:
    """Each id listed once and each in `held` (else the event names one `where` lacks)."""
    require(len(set(episode_ids)) == len(episode_ids), seq, kind, "an episode is listed twice")
    for episode_id in episode_ids:
        if episode_id not in held:  # the message is built only for the one that is missing
            raise InconsistentLogError(seq, kind, f"{episode_id} is not {where}")


def release(episode_ids: Sequence[str], *holders: MutableMapping[str, Any]) -> None:
    """Remove ids that `require_held` vouched for from each of `holders` (a group's map and
    the state's)."""
    for episode_id in episode_ids:
        for held in holders:
            del held[episode_id]
