"""Every preset name the grammar allows (a base, then rules in any order) sets exactly what
its parts say: the base's staleness, each named rule's key, every other policy key off."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError
from rolloutlog.core.presets import BASES, RULES, parse_policy_list, preset_overrides

OFF = {"admission": "none", "straggler_cut": False, "batch_order": "fifo"}


@given(st.sampled_from(BASES), st.lists(st.sampled_from(sorted(RULES)), unique=True))
def test_a_preset_sets_its_base_and_exactly_its_rules(base: str, rules: list[str]) -> None:
    expected = {"staleness": base, **OFF}
    for rule in rules:
        expected.update(RULES[rule])
    assert preset_overrides("+".join([base, *rules])) == expected


PRESET_NAMES = st.builds(
    lambda base, rules: "+".join([base, *rules]),
    st.sampled_from(BASES),
    st.lists(st.sampled_from(sorted(RULES)), unique=True),
)
SPACE = st.sampled_from(["", " ", "  ", "\t"])


@given(st.lists(st.tuples(SPACE, PRESET_NAMES, SPACE), min_size=1, max_size=4), st.data())
def test_a_policy_list_reads_its_names_and_refuses_a_repeat(
    parts: list[tuple[str, str, str]], data: st.DataObject
) -> None:
    names = [name for _, name, _ in parts]
    text = ",".join(f"{before}{name}{after}" for before, name, after in parts)
    if len(set(names)) == len(names):
        assert parse_policy_list(text) == names
    repeated = data.draw(st.sampled_from(names))
    with pytest.raises(ConfigError, match=r"names a policy twice$"):
        parse_policy_list(f"{text},{repeated}")


@given(st.text(", \t", max_size=6))
def test_an_empty_policy_list_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^policy list is empty; for example per-episode"):
        parse_policy_list(text)


@given(PRESET_NAMES, st.sampled_from(["per-batch", "", "capacity", "PER-EPISODE"]))
def test_a_preset_with_an_unknown_base_is_refused_by_name(name: str, base: str) -> None:
    rules = name.split("+")[1:]
    bad = "+".join([base, *rules])
    with pytest.raises(ConfigError) as refused:
        preset_overrides(bad)
    assert str(refused.value) == (
        f"policy {bad!r}: must start with one of per-episode, per-group (or be 'all')"
    )


@given(PRESET_NAMES, st.sampled_from(["caps", "", "per-group", "all"]), st.data())
def test_a_preset_with_an_unknown_rule_is_refused_by_name(
    name: str, rule: str, data: st.DataObject
) -> None:
    parts = name.split("+")
    at = data.draw(st.integers(1, len(parts)))
    bad = "+".join([*parts[:at], rule, *parts[at:]])
    with pytest.raises(ConfigError) as refused:
        preset_overrides(bad)
    assert str(refused.value) == (
        f"policy {bad!r}: unknown rule {rule!r}; known rules: capacity, straggler, oldest-first"
    )
