"""The configuration builder on generated configurations: a recorded config rebuilds to
itself, and every bad value or unknown key is refused by name (the unstartable
combinations are `test_config_startup.py`'s).

The bad values are listed here per field, apart from `core.config`'s own checks, so a
check that stops refusing (or a refusal that stops naming its key) fails a property.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import (
    BATCH_KEYS,
    ConfigError,
    RunConfig,
    apply_overrides,
    build_config,
    checked,
    parse_overrides,
)
from rolloutlog.testing.strategies import run_configs

WRONG_TYPE: dict[object, list[Any]] = {
    int: ["7", True, 1.5, [1]],
    float: ["0.5", True, math.nan, math.inf, -math.inf],
    bool: [1, 0, "true", None],
    str: [3, ["all"], None],
    "literal": ["nonsense", 1, None],
}
FIELD_TYPES: dict[str, object] = {
    "max_inflight": int,
    "max_off_policy_steps": int,
    "group_size": int,
    "batch_size": int,
    "token_batch_size": int,
    "target_lag": int,
    "staleness": "literal",
    "filter_zero_advantages": bool,
    "seed": int,
    "tasks": int,
    "eval_interval": int,
    "frozen_fraction": float,
    "admission_smoothing": bool,
    "curriculum": str,
    "zero_output_batches": int,
    "admission": "literal",
    "straggler_cut": bool,
    "batch_order": "literal",
    "requeue": "literal",
    "stale_member": "literal",
    "gate_lag": "literal",
    "dispatch_gate": bool,
    "liveness": bool,
    "outstanding_depth": int,
    "requeue_order": "literal",
    "stale_step": "literal",
    "gate_check": "literal",
    "stale_cancel": "literal",
    "stale_check": "literal",
    "queue_sweep": "literal",
    "overload_count": "literal",
    "admission_window": "literal",
    "eval_first": bool,
    "staleness_threshold": float,
    "updates_per_sync": int,
    "ship_wait": "literal",
    "update_pause": "literal",
    "step_order": "literal",
    "weight_update": "literal",
    "recycle": bool,
    "stale_tokens": "literal",
    "queue_limit": int,
    "queue_eviction": "literal",
    "max_lag": int,
    "over_sampling_batch_size": int,
    "leftovers": "literal",
    "group_redundancy": int,
    "async_generation_ratio": float,
}
OUT_OF_RANGE: dict[str, list[Any]] = {
    "max_inflight": [0, -3],
    "max_off_policy_steps": [-1],
    "group_size": [0],
    "batch_size": [0, -1],
    "token_batch_size": [0],
    "target_lag": [-1],
    "tasks": [0],
    "eval_interval": [-2],
    "frozen_fraction": [1.5, -0.25, 2],
    "curriculum": ["no-such-rule"],
    "zero_output_batches": [0],
    "staleness_threshold": [-0.5],
    "updates_per_sync": [0],
    "queue_limit": [-1],
    "max_lag": [-1],
    "over_sampling_batch_size": [0],
    "group_redundancy": [-1],
    "async_generation_ratio": [-0.5],
}
OPTIONAL = {"batch_size", "token_batch_size", "over_sampling_batch_size"}
WHERES = st.sampled_from(["config", "scenario.run", "run_started.config"])


def test_the_table_of_fields_is_complete() -> None:
    assert sorted(FIELD_TYPES) == sorted(f.name for f in attrs.fields(RunConfig))


def bad_values(name: str) -> list[Any]:
    wrong = [v for v in WRONG_TYPE[FIELD_TYPES[name]] if not (v is None and name in OPTIONAL)]
    return wrong + OUT_OF_RANGE.get(name, [])


@given(run_configs(), WHERES, st.booleans())
def test_a_recorded_config_rebuilds_to_itself(
    config: RunConfig, where: str, startable: bool
) -> None:
    rebuilt = RunConfig.from_mapping(config.to_dict(), where, startable=startable)
    assert rebuilt == config
    assert rebuilt.startup_problems() == []
    assert isinstance(rebuilt.frozen_fraction, float)


@given(run_configs(), WHERES)
def test_an_integer_is_taken_where_a_number_is_expected(config: RunConfig, where: str) -> None:
    data = config.to_dict()
    data["frozen_fraction"] = round(config.frozen_fraction)
    built = RunConfig.from_mapping(data, where)
    assert type(built.frozen_fraction) is float
    assert built.frozen_fraction == data["frozen_fraction"]


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name in sorted(FIELD_TYPES) for value in bad_values(name)]
)
@given(config=run_configs(), where=WHERES, startable=st.booleans())
def test_a_bad_value_is_refused_by_its_key(
    name: str, value: Any, config: RunConfig, where: str, startable: bool
) -> None:
    """Every field with each of its bad values, in a recorded config's mapping."""
    data = {**config.to_dict(), name: value}
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_mapping(data, where, startable=startable)
    message = str(refused.value)
    assert message.startswith(f"{where}.{name}: must ")
    assert message.endswith(f"(got {value!r})")


SCALAR_NAMES = {int: "an integer", float: "a number", bool: "a boolean", str: "a string"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (name, value)
        for name, kind in sorted(FIELD_TYPES.items())
        if kind in SCALAR_NAMES
        for value in bad_values(name)
        if value in WRONG_TYPE[kind] and not (isinstance(value, float) and not math.isfinite(value))
    ],
)
@given(config=run_configs(), where=WHERES)
def test_a_value_of_the_wrong_type_is_refused_naming_the_type(
    name: str, value: Any, config: RunConfig, where: str
) -> None:
    """The refusal says what the key takes, in words (the non-finite floats have their own)."""
    data = {**config.to_dict(), name: value}
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_mapping(data, where)
    expected = SCALAR_NAMES[FIELD_TYPES[name]]  # type: ignore[index]
    assert str(refused.value) == f"{where}.{name}: must be {expected} (got {value!r})"


BOUNDS: dict[str, list[Any]] = {
    "max_inflight": [1],
    "max_off_policy_steps": [0],
    "group_size": [1],
    "batch_size": [1],
    "token_batch_size": [1],
    "target_lag": [0],
    "tasks": [1],
    "eval_interval": [0],
    "frozen_fraction": [0, 0.0, 1, 1.0],
    "zero_output_batches": [1],
}


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in BOUNDS.items() for value in values]
)
@given(config=run_configs(), where=WHERES)
def test_a_value_on_its_bound_is_taken(
    name: str, value: Any, config: RunConfig, where: str
) -> None:
    data = {**config.to_dict(), name: value}
    if name in BATCH_KEYS:  # exactly one batch key is set
        data[BATCH_KEYS[name == BATCH_KEYS[0]]] = None
    if name == "max_off_policy_steps":
        data["target_lag"] = 0  # the gate may not lag past the bound
    if name == "group_size":
        data.pop("over_sampling_batch_size", None)  # a round holds at least a batch's groups
    built = RunConfig.from_mapping(data, where)
    assert getattr(built, name) == value


@given(run_configs(), WHERES, st.text("abcdefghij_", min_size=1, max_size=12))
def test_an_unknown_key_is_refused_by_name(config: RunConfig, where: str, key: str) -> None:
    data = config.to_dict()
    if key in data:
        key += "_extra"
    data[key] = 1
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_mapping(data, where)
    known = ", ".join(sorted(FIELD_TYPES))
    assert str(refused.value) == f"{where}: unknown key {key!r}; known keys: {known}"


@given(run_configs(), st.integers(1, 10_000))
def test_setting_only_token_batches_switches_the_batch_unit(config: RunConfig, tokens: int) -> None:
    data = config.to_dict()
    del data["batch_size"]
    data["token_batch_size"] = tokens
    built = RunConfig.from_mapping(data)
    assert (built.batch_size, built.token_batch_size) == (None, tokens)


def _toml(value: Any) -> str:
    """The TOML text of a config value (what a user types after `--set key=`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


@given(run_configs(), st.data())
def test_set_options_read_back_as_the_values_they_spell(
    config: RunConfig, data: st.DataObject
) -> None:
    values = {k: v for k, v in config.to_dict().items() if v is not None}
    keys = data.draw(st.lists(st.sampled_from(sorted(values)), min_size=1, unique=True))
    items = [f"{key}={_toml(values[key])}" for key in keys]
    assert parse_overrides(items) == {key: values[key] for key in keys}
    bare = {key: values[key] for key in keys if isinstance(values[key], str)}
    assert parse_overrides(f" {key} = {value}" for key, value in bare.items()) == bare


@given(st.sampled_from(["", "=3", "  =x", "batch_size", "no equals sign"]))
def test_a_set_option_without_key_and_value_is_refused_by_its_text(item: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_overrides([item])
    assert str(refused.value) == f"--set {item!r}: expected key=value"


@given(run_configs(), st.integers(1, 64), st.integers(1, 4000), st.booleans())
def test_one_batch_key_overridden_clears_the_other(
    config: RunConfig, episodes: int, tokens: int, both: bool
) -> None:
    base = config.to_dict()
    assert apply_overrides(base, {"batch_size": episodes}) == {
        **base,
        "batch_size": episodes,
        "token_batch_size": None,
    }
    assert apply_overrides(base, {"token_batch_size": tokens}) == {
        **base,
        "batch_size": None,
        "token_batch_size": tokens,
    }
    if both:  # both given: both kept, and refused later by the startup check
        overrides = {"batch_size": episodes, "token_batch_size": tokens}
        assert apply_overrides(base, overrides) == {**base, **overrides}
    assert apply_overrides(base, {"seed": 5}) == {**base, "seed": 5}


@attrs.frozen(kw_only=True)
class _Paths:
    """A config class with a field type outside bool/int/float/str."""

    root: Path = checked(Path("."), None, "a directory")


@given(st.sampled_from(["runs", 3, None, ["a"]]))
def test_other_field_types_are_taken_as_instances_only(value: Any) -> None:
    assert build_config(_Paths, {"root": Path("x")}) == _Paths(root=Path("x"))
    with pytest.raises(ConfigError) as refused:
        build_config(_Paths, {"root": value}, where="paths")
    assert str(refused.value) == f"paths.root: must be Path (got {value!r})"
