"""Every preset name the grammar allows (a base, then rules in any order) sets exactly what
its parts say: the base's staleness, each named rule's key, every other policy key off."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.presets import BASES, RULES, preset_overrides

OFF = {"admission": "none", "straggler_cut": False, "batch_order": "fifo"}


@given(st.sampled_from(BASES), st.lists(st.sampled_from(sorted(RULES)), unique=True))
def test_a_preset_sets_its_base_and_exactly_its_rules(base: str, rules: list[str]) -> None:
    expected = {"staleness": base, **OFF}
    for rule in rules:
        expected.update(RULES[rule])
    assert preset_overrides("+".join([base, *rules])) == expected
