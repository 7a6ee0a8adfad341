"""Registering a curriculum: a new name becomes selectable by config, registering the same
rule again changes nothing, and another rule under a taken name is refused by name.

Registration happens inside each example (and is undone after it): a registration at
import time runs once per process, before anything under test could change it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.curriculum import (
    CURRICULA,
    Curriculum,
    ScoredGroup,
    curriculum_named,
    known_curriculum,
    register_curriculum,
)

NAMES = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=10).map(lambda s: f"test-{s}")


def _threshold(at: float) -> Curriculum:
    return lambda group: sum(group.rewards) > at


@given(NAMES, st.floats(-2, 2), st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=4))
def test_a_registered_curriculum_is_selectable_and_kept(
    name: str, at: float, rewards: list[float]
) -> None:
    admit, other = _threshold(at), _threshold(at)
    with pytest.raises(ConfigError, match=f"curriculum: must be one of .*got '{name}'"):
        RunConfig.from_mapping({"curriculum": name})
    try:
        register_curriculum(name, admit)
        assert known_curriculum(name) is None
        assert RunConfig.from_mapping({"curriculum": name}).curriculum == name
        register_curriculum(name, admit)  # the same rule again: nothing changes
        with pytest.raises(ValueError, match=f"^curriculum '{name}' is already registered$"):
            register_curriculum(name, other)
        chosen = curriculum_named(name)
        assert chosen is admit
        group = ScoredGroup(
            group_id="g0",
            task_id="t0",
            env="env",
            episode_ids=tuple(f"g0/{i}" for i in range(len(rewards))),
            rewards=tuple(rewards),
            advantages=(0.0,) * len(rewards),
        )
        assert chosen(group) == (sum(rewards) > at)
    finally:
        CURRICULA.pop(name, None)
    with pytest.raises(KeyError, match=f"curriculum '{name}' is not registered"):
        curriculum_named(name)
