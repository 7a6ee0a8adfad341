"""`--set` keys qualified on generated sections: every key given once, bare where one
section has it or as `section.key`, lands under its own `(section, key)` with its value,
and each refusal names the `--set` option it refuses (the simulator's and the live
runtime's commands both qualify their keys through `core.overrides`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError
from rolloutlog.core.overrides import qualify_overrides

NAMES = st.text("abcdefg_", min_size=1, max_size=4)
# Up to three sections, each with one to five keys; a key may be in several sections.
SECTIONS = st.dictionaries(
    NAMES, st.frozensets(NAMES, min_size=1, max_size=5), min_size=1, max_size=3
)

Sections = dict[str, frozenset[str]]


def _owners(sections: Sections, key: str) -> list[str]:
    return [section for section, keys in sections.items() if key in keys]


@st.composite
def _given(draw: st.DrawFn) -> tuple[Sections, dict[str, Any], dict[tuple[str, str], Any]]:
    """Sections, some of their settings each given once (bare only where that key has one
    section), and the qualified overrides they must come to."""
    sections = draw(SECTIONS)
    every = sorted((section, key) for section, keys in sections.items() for key in keys)
    chosen = draw(st.lists(st.sampled_from(every), unique=True))
    overrides: dict[str, Any] = {}
    expected: dict[tuple[str, str], Any] = {}
    for section, key in chosen:
        bare = len(_owners(sections, key)) == 1 and draw(st.booleans())
        value = draw(st.integers())
        overrides[key if bare else f"{section}.{key}"] = value
        expected[section, key] = value
    return sections, overrides, expected


@given(_given())
def test_each_key_given_once_lands_under_its_section(
    given_: tuple[Sections, dict[str, Any], dict[tuple[str, str], Any]],
) -> None:
    sections, overrides, expected = given_
    assert qualify_overrides(overrides, sections) == expected


@given(SECTIONS.filter(lambda sections: len(sections) > 1), NAMES, st.data())
def test_a_bare_key_of_several_sections_is_refused_naming_each(
    sections: Sections, key: str, data: st.DataObject
) -> None:
    holders = data.draw(st.sets(st.sampled_from(sorted(sections)), min_size=2), label="holders")
    sections = {s: keys | {key} if s in holders else keys for s, keys in sections.items()}
    options = " or ".join(f"{section}.{key}" for section in _owners(sections, key))
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({key: 1}, sections)
    assert str(refused.value) == f"--set {key}: ambiguous, name {options}"


@given(SECTIONS, NAMES, st.data())
def test_one_setting_given_bare_and_qualified_is_refused(
    sections: Sections, name: str, data: st.DataObject
) -> None:
    section = data.draw(st.sampled_from(sorted(sections)), label="section")
    key = f"h{name}"  # in no section (`h` is not in NAMES' alphabet) until this one gets it
    sections = {**sections, section: sections[section] | {key}}
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({key: 1, f"{section}.{key}": 2}, sections)
    assert str(refused.value) == (
        f"--set {key} and --set {section}.{key}: two values for {section}.{key}; give one"
    )


@given(SECTIONS, st.data())
def test_a_reserved_key_is_refused_with_its_reason(sections: Sections, data: st.DataObject) -> None:
    section = data.draw(st.sampled_from(sorted(sections)), label="section")
    key = data.draw(st.sampled_from(sorted(sections[section])), label="key")
    reserved = {f"{section}.{key}": "set by --seed"}
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({f"{section}.{key}": 1}, sections, reserved=reserved)
    assert str(refused.value) == f"--set {section}.{key}: set by --seed"


@given(SECTIONS, NAMES, st.data())
def test_an_unknown_key_is_refused_naming_the_keys_it_could_be(
    sections: Sections, name: str, data: st.DataObject
) -> None:
    """Bare, the refusal lists every section's keys; qualified, its section's; under no
    section, the sections."""
    key = f"h{name}"  # in no section (`h` is not in NAMES' alphabet)
    section = data.draw(st.sampled_from(sorted(sections)), label="section")
    known = "; ".join(f"{s} keys: {', '.join(sorted(keys))}" for s, keys in sections.items())
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({key: 1}, sections)
    assert str(refused.value) == f"--set {key}: unknown key; {known}"
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({f"{section}.{key}": 1}, sections)
    listed = ", ".join(sorted(sections[section]))
    assert (
        str(refused.value) == f"--set {section}.{key}: unknown key; known {section} keys: {listed}"
    )
    with pytest.raises(ConfigError) as refused:
        qualify_overrides({f"h{section}.{name}": 1}, sections)
    assert str(refused.value).startswith(f"--set h{section}.{name}: the section must be `")
