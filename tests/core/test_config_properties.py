"""The configuration builder on generated configurations: a recorded config rebuilds to
itself, and every bad value, unknown key or unstartable combination is refused by name.

The bad values are listed here per field, apart from `core.config`'s own checks, so a
check that stops refusing (or a refusal that stops naming its key) fails a property.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import (
    BATCH_KEYS,
    MAX_INFLIGHT,
    ConfigError,
    RunConfig,
    apply_overrides,
    build_config,
    checked,
    describe_fields,
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
    "stale_cancel": "literal",
    "stale_check": "literal",
    "queue_sweep": "literal",
    "overload_count": "literal",
    "admission_window": "literal",
    "eval_first": bool,
    "staleness_threshold": float,
    "updates_per_sync": int,
    "ship_wait": "literal",
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


@attrs.frozen
class Unstartable:
    """A combination that `RunConfig.startup_problems` refuses, made from a startable
    config: `pins` the drawn config so that `change` breaks exactly one rule; `problem` is
    the whole refusal, from the config as changed (the refusal is what a user reads)."""

    pins: Callable[[st.DrawFn], dict[str, Any]]
    change: Callable[[RunConfig, st.DrawFn], dict[str, Any]]
    problem: Callable[[RunConfig], str]


def _pinned(**pins: Any) -> Callable[[st.DrawFn], dict[str, Any]]:
    return lambda draw: pins


def _batches(draw: st.DrawFn, *, past_a_group: bool = False) -> dict[str, Any]:
    """Counted batches (of more episodes than a group, with `past_a_group`), groups of two
    or more, no queue drawn."""
    group = draw(st.integers(2, 8))
    return {
        "group_size": group,
        "batch_size": draw(st.integers(group + 1 if past_a_group else 1, 12)),
        "token_batch_size": None,
        "queue_limit": 0,
    }


def _slime_round(draw: st.DrawFn) -> dict[str, Any]:
    group = draw(st.integers(1, 4))
    return {
        "admission": "slime",
        "group_size": group,
        "token_batch_size": None,
        "batch_size": draw(st.integers(group + 1, 12)),
        "over_sampling_batch_size": None,
    }


def _least(config: RunConfig) -> int:
    """The smallest queue whole-group eviction takes: a batch beside a group, less one."""
    return config.group_size + (config.batch_size or 0) - 1


def _groups(config: RunConfig) -> int:
    return -(-(config.batch_size or 0) // config.group_size)


def _both_batch_keys(c: RunConfig) -> str:
    return (
        "batch_size / token_batch_size: set exactly one "
        f"(got batch_size={c.batch_size}, token_batch_size={c.token_batch_size})"
    )


NOT_OUTSTANDING = ["none", "capacity", "areal", "verl", "max-lag", "slime", "roll"]
NO_BUDGET = ["none", "capacity", "areal", "outstanding", "max-lag", "roll"]
UNSTARTABLE: dict[str, Unstartable] = {
    "both batch keys": Unstartable(
        _pinned(),
        # a drawn queue_limit fits the drawn batch size, not necessarily 4; the round was
        # drawn for the run's own batches
        lambda c, draw: {
            "batch_size": c.batch_size or 4,
            "token_batch_size": 100,
            "over_sampling_batch_size": None,
        },
        _both_batch_keys,
    ),
    "no batch key": Unstartable(
        _pinned(),
        lambda c, draw: {"batch_size": None, "token_batch_size": None},
        _both_batch_keys,
    ),
    "lag past bound": Unstartable(
        _pinned(),
        lambda c, draw: {"target_lag": c.max_off_policy_steps + 1},
        lambda c: (
            f"target_lag: must be <= max_off_policy_steps ({c.max_off_policy_steps}), got "
            f"{c.target_lag}: the gate would let episodes be dispatched already stale"
        ),
    ),
    "too many permits": Unstartable(
        _pinned(),
        lambda c, draw: {"max_inflight": draw(st.integers(MAX_INFLIGHT + 1, 2 * MAX_INFLIGHT))},
        lambda c: (
            f"max_inflight: at most {MAX_INFLIGHT:,}, got {c.max_inflight:,}: one event may "
            "dispatch every free permit, and the loop bounds what one event sets off"
        ),
    ),
    "a queue short of a group or a batch": Unstartable(
        _batches,
        lambda c, draw: {
            "queue_limit": draw(st.integers(1, max(c.group_size, c.batch_size or 0) - 1)),
            "queue_eviction": draw(st.sampled_from(["oldest-episode", "oldest-group"])),
        },
        lambda c: (
            f"queue_limit: must be 0 or >= group_size and batch_size, got {c.queue_limit}: an "
            "admitted group must fit in the queue, and a batch must be able to fill"
        ),
    ),
    "a queue evicting groups short of a batch beside a group": Unstartable(
        lambda draw: _batches(draw, past_a_group=True),
        lambda c, draw: {
            "queue_limit": draw(st.integers(max(c.group_size, c.batch_size or 0), _least(c) - 1)),
            "queue_eviction": "oldest-group",
        },
        lambda c: (
            f"queue_limit: must be >= batch_size + group_size - 1 ({_least(c)}) with "
            f"queue_eviction = 'oldest-group', got {c.queue_limit}: evicting whole groups from "
            "a smaller queue can keep it below a batch for ever"
        ),
    ),
    "a slime round short of a batch": Unstartable(
        _slime_round,
        lambda c, draw: {"over_sampling_batch_size": draw(st.integers(1, _groups(c) - 1))},
        lambda c: (
            f"over_sampling_batch_size: must be >= the {_groups(c)} groups of a batch (got "
            f"{c.over_sampling_batch_size}): slime refuses a round smaller than "
            "rollout_batch_size"
        ),
    ),
    "a last-chance wait without its cap": Unstartable(
        lambda draw: {
            "ship_wait": "none",
            "weight_update": "freeze",
            "admission": draw(st.sampled_from(NOT_OUTSTANDING)),
        },
        lambda c, draw: {"ship_wait": "last-chance"},
        lambda c: (
            f"ship_wait: 'last-chance' needs admission = 'outstanding' (got {c.admission!r}): "
            "PR #822 waits behind its cap on outstanding groups; without it new groups keep "
            "opening at their last chance and a batch may wait for ever"
        ),
    ),
    "a last-chance wait under a drain": Unstartable(
        _pinned(ship_wait="none", admission="outstanding", weight_update="drain", recycle=False),
        lambda c, draw: {"ship_wait": "last-chance"},
        lambda c: (
            "ship_wait: 'last-chance' does not combine with weight_update = 'drain': a drained "
            "update holds the dispatch a waiting batch needs"
        ),
    ),
    "ROLL's window over several updates": Unstartable(
        _pinned(batch_order="roll-window", updates_per_sync=1, recycle=False),
        lambda c, draw: {"updates_per_sync": draw(st.integers(2, 3))},
        lambda c: (
            f"batch_order: 'roll-window' needs updates_per_sync = 1 (got {c.updates_per_sync}): "
            "ROLL's window counts one weight update a step, and with fewer versions it excludes "
            "what waits, so batches never fill"
        ),
    ),
    "a drain behind verl's or slime's budget": Unstartable(
        lambda draw: {
            "weight_update": "freeze",
            "recycle": False,
            "ship_wait": "none",
            "admission": draw(st.sampled_from(["verl", "slime"])),
        },
        lambda c, draw: {"weight_update": "drain"},
        lambda c: (
            f"weight_update: 'drain' does not combine with admission = {c.admission!r}: its "
            "budget reopens only with a new version or step, which a drained update holds "
            "back, and runs stall"
        ),
    ),
    "recycling under a drain": Unstartable(
        lambda draw: {
            "recycle": True,
            "weight_update": "freeze",
            "updates_per_sync": 1,
            "ship_wait": "none",
            "admission": draw(st.sampled_from(NO_BUDGET)),
        },
        lambda c, draw: {"weight_update": "drain"},
        lambda c: (
            "recycle: does not combine with weight_update = 'drain': a drained update waits "
            "for the work in flight, and recycled work waits for the update"
        ),
    ),
    "recycling over several updates": Unstartable(
        lambda draw: {
            "recycle": True,
            "weight_update": "freeze",
            "updates_per_sync": 1,
            "batch_order": draw(st.sampled_from(["fifo", "oldest-first"])),
        },
        lambda c, draw: {"updates_per_sync": draw(st.integers(2, 3))},
        lambda c: (
            f"recycle: needs updates_per_sync = 1 (got {c.updates_per_sync}): recycled work "
            "holds train dispatch until the next version goes live, and the batches of a sync "
            "would wait for it"
        ),
    ),
    "redundant members under slime": Unstartable(
        _pinned(admission="slime", group_redundancy=0),
        lambda c, draw: {"group_redundancy": draw(st.integers(1, 2))},
        lambda c: (
            f"group_redundancy: must be 0 under admission = 'slime' (got {c.group_redundancy}): "
            "slime's rounds count whole groups of group_size"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(UNSTARTABLE))
@given(data=st.data())
def test_a_config_that_cannot_start_is_refused_yet_folds_as_recorded(
    name: str, data: st.DataObject
) -> None:
    fault = UNSTARTABLE[name]
    config = data.draw(run_configs(**fault.pins(data.draw)), label="startable")
    change = fault.change(config, data.draw)
    values = config.to_dict() | change
    with pytest.raises(ConfigError) as refused:
        RunConfig.from_mapping(values)
    recorded = RunConfig.from_mapping(values, startable=False)
    assert attrs.asdict(recorded) == attrs.asdict(config) | change
    assert recorded.startup_problems() == [fault.problem(recorded)]
    assert str(refused.value) == fault.problem(recorded)


# Each refused combination undone at its boundary starts (the strategy's own draws reach the
# others: a queue of exactly its least, a round of a batch's groups, a lag at the bound).
ON_THE_LIMIT: dict[str, Callable[[RunConfig], dict[str, Any]]] = {
    "the most permits": lambda c: {"max_inflight": MAX_INFLIGHT},
    "no queue, whatever its eviction": lambda c: {
        "queue_limit": 0,
        "queue_eviction": "oldest-group",
    },
    "a queue of a group and a batch, whole-group eviction": lambda c: {
        "queue_limit": _least(c),
        "queue_eviction": "oldest-group",
    },
    "a queue of a group or a batch, episode eviction": lambda c: {
        "queue_limit": max(c.group_size, c.batch_size or 0),
        "queue_eviction": "oldest-episode",
    },
}


COUNTED = st.integers(1, 12).flatmap(lambda b: run_configs(token_batch_size=None, batch_size=b))


@pytest.mark.parametrize("name", sorted(ON_THE_LIMIT))
@given(config=COUNTED)
def test_a_config_on_a_startup_limit_starts(name: str, config: RunConfig) -> None:
    values = config.to_dict() | ON_THE_LIMIT[name](config)
    assert RunConfig.from_mapping(values).startup_problems() == []


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


def test_the_described_fields_are_the_config_in_order_with_their_docs() -> None:
    described = describe_fields(RunConfig)
    defaults = attrs.asdict(RunConfig())  # to_dict leaves the field presets' keys out
    assert [name for name, _, _ in described] == list(defaults)
    for name, default, doc in described:
        assert doc, name
        assert default == (None if name == "target_lag" else defaults[name]), name


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
