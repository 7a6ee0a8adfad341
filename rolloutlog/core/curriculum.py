"""Curricula: which scored groups are admitted to training.

A curriculum is `admit(group) -> bool`, looked up by the name in `RunConfig.curriculum`,
so that a recorded log names the rule that made its decisions and replay can re-run it.
Register your own with `register_curriculum` before building the config that names it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen(kw_only=True)
class ScoredGroup:
    """What a curriculum sees: the scored members of one finalized train group."""

    group_id: str
    task_id: str
    env: str
    episode_ids: tuple[str, ...]
    rewards: tuple[float, ...]
    advantages: tuple[float, ...]


Curriculum = Callable[[ScoredGroup], bool]


def admit_all(group: ScoredGroup) -> bool:
    """The default: every scored group trains."""
    return True


def admit_informative(group: ScoredGroup) -> bool:
    """Reject groups whose scored rewards are all equal: GRPO gives them no signal."""
    return len(set(group.rewards)) > 1


CURRICULA: dict[str, Curriculum] = {"all": admit_all, "informative": admit_informative}


def register_curriculum(name: str, admit: Curriculum) -> None:
    """Make `admit` selectable as `curriculum = name`; admission must be a pure function."""
    if name in CURRICULA and CURRICULA[name] is not admit:
        raise ValueError(f"curriculum {name!r} is already registered")
    CURRICULA[name] = admit


def curriculum_named(name: str) -> Curriculum:
    """The curriculum registered as `name`."""
    if name not in CURRICULA:
        raise KeyError(f"curriculum {name!r} is not registered; known: {', '.join(CURRICULA)}")
    return CURRICULA[name]


def known_curriculum(name: str) -> str | None:
    """A config check: None when `name` is registered, else what is allowed."""
    return None if name in CURRICULA else f"must be one of {', '.join(map(repr, CURRICULA))}"
