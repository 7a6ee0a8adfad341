"""Every preset name the grammar allows (a base, then rules in any order) sets exactly what
its parts say: the base's staleness, each named rule's key, every other policy key off."""

from __future__ import annotations

import typing

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.presets import (
    BASE_KEYS,
    BASES,
    CHOICES,
    FIELD,
    NAMED,
    RULES,
    SERVES,
    SWITCHED_BY_COUNT,
    FieldPreset,
    Rules,
    parse_policy_list,
    preset_overrides,
    rules_for,
)
from rolloutlog.core.rules.table import DERIVED
from rolloutlog.testing.strategies import run_configs
from tests.core.test_policy_knobs import FIELD_RULES_OFF

OFF = {
    "admission": "none",
    "admission_smoothing": False,
    "straggler_cut": False,
    "batch_order": "fifo",
    "requeue": "none",
    **FIELD_RULES_OFF,
}


def _contradicting(rules: list[str]) -> bool:
    """Whether two of `rules` set one key to different values (`drain`, `interrupt`)."""
    values: dict[str, set[object]] = {}
    for rule in rules:
        for key, value in RULES[rule].items():
            values.setdefault(key, set()).add(value)
    return any(len(each) > 1 for each in values.values())


@given(st.sampled_from(BASES), st.lists(st.sampled_from(sorted(RULES)), unique=True))
def test_a_preset_sets_its_base_and_exactly_its_rules(base: str, rules: list[str]) -> None:
    """...or is refused when two of its rules set one key two ways (`+drain+interrupt` ran
    `+interrupt`, the last part silently winning)."""
    name = "+".join([base, *rules])
    if _contradicting(rules):
        with pytest.raises(ConfigError, match=r"contradict each other \(weight_update = "):
            preset_overrides(name)
        return
    expected = {"staleness": base, **OFF, **BASE_KEYS[base]}
    for rule in rules:
        expected.update(RULES[rule])
    assert preset_overrides(name) == expected


PRESET_NAMES = st.builds(
    lambda base, rules: "+".join([base, *rules]),
    st.sampled_from(BASES),
    st.lists(st.sampled_from(sorted(RULES)), unique=True).filter(
        lambda rules: not _contradicting(rules)
    ),
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
        f"policy {bad!r}: must start with one of {', '.join([*BASES, *FIELD])} (or be 'all')"
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
        f"policy {bad!r}: unknown rule {rule!r}; "
        "known rules: capacity, straggler, oldest-first, interrupt, drain, recycle, mask"
    )


def test_the_rule_table_chooses_every_rule_once_for_every_value_a_key_takes() -> None:
    """Each policy key's rows name the same rules, the keys together name every field of
    `Rules` once (but those read once from the rows chosen, `DERIVED`), and every value the
    config allows for a key has its row (a count's: zero or not)."""
    fields = [field.name for field in attrs.fields(Rules) if field.name not in DERIVED]
    named: list[str] = []
    for key, rows in CHOICES.items():
        allowed = typing.get_args(typing.get_type_hints(RunConfig)[key]) or (False, True)
        assert sorted(rows, key=str) == sorted(allowed, key=str), key
        (names,) = {tuple(sorted(row)) for row in rows.values()}
        named.extend(names)
    assert sorted(named) == sorted(fields)


@given(run_configs())
def test_a_run_gets_the_rules_its_policy_keys_choose(config: RunConfig) -> None:
    rules = rules_for(config)
    for key, rows in CHOICES.items():
        value = getattr(config, key)
        for name, function in rows[bool(value) if key in SWITCHED_BY_COUNT else value].items():
            unused = name in SERVES and getattr(rules, SERVES[name]) is None
            assert getattr(rules, name) is (None if unused else function), (key, name)
    assert rules.hold_lag == rules.lag(config)
    assert rules.gate_lag == rules.gate(rules.lag(config))


def test_field_stands_for_every_field_preset_then_rolloutlogs_own_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        FIELD, "stack", FieldPreset("org/stack@abc1234 a.py", {"admission": "capacity"})
    )
    assert parse_policy_list(" field ") == [*FIELD, "per-episode", "all"]
    assert parse_policy_list("per-group,field")[-3:] == ["stack", "per-episode", "all"]
    with pytest.raises(ConfigError, match=r"names a policy twice$"):
        parse_policy_list("field,all")


def test_a_field_preset_sets_its_own_keys_on_top_of_every_rule_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = {"staleness": "per-group", "admission": "capacity"}
    monkeypatch.setitem(FIELD, "stack", FieldPreset("org/stack@abc1234 a.py", keys))
    assert preset_overrides("stack") == {**OFF, **keys}
    assert preset_overrides("stack+oldest-first") == {**OFF, **keys, **RULES["oldest-first"]}


PRESETS = [*NAMED, *FIELD]


@pytest.mark.parametrize("before", PRESETS)
def test_a_preset_decides_alike_whatever_preset_ran_before(before: str) -> None:
    """`whatif --compare Q` on a log of preset P evolves P's config by Q's keys: no key P
    set may survive into Q (prime-rl's `admission_smoothing` did, under every other
    preset, until it was among the keys every preset turns off)."""
    ran = attrs.evolve(RunConfig(), **preset_overrides(before))
    for after in PRESETS:
        overrides = preset_overrides(after)
        got, fresh = attrs.evolve(ran, **overrides), attrs.evolve(RunConfig(), **overrides)
        assert got == fresh, f"{before} then {after}"
