"""Hypothesis strategies for run configurations and valid logs, built by construction.

Public so that a future change to the deciders can be checked against the previous one
the same way the project's own suites do (see `testing.equivalence`). Needs hypothesis
(the `test` extra).
"""

from __future__ import annotations

import random
from typing import Any

import attrs
from hypothesis import assume as hypothesis_assume
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig, least_queue_limit
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import (
    CANCEL_REASONS,
    DECIDED_KINDS,
    WORK_KINDS,
    Event,
    event_fields,
)
from rolloutlog.testing.scripted_world import scripted_log


@st.composite
def run_configs(draw: st.DrawFn, /, **fixed: Any) -> RunConfig:
    """Small configurations that exercise every rule: binding limits, large G, tight bounds.

    Keyword arguments pin fields (for example `staleness="per-group"`).
    """
    group_size = draw(st.integers(1, 8))
    values = _drawn_keys(draw, group_size)
    if draw(st.integers(0, 4)) == 0:
        values["token_batch_size"] = draw(st.integers(16, 400))
        values["batch_size"] = None
    else:
        values["batch_size"] = draw(st.integers(1, 12))
    values["target_lag"] = draw(st.integers(0, min(2, values["max_off_policy_steps"])))
    values.update(fixed)
    _queue_and_rounds(draw, values, fixed)
    _partial_rules(values, fixed)
    _gates_and_liveness(values, fixed)
    _startable(values, fixed)
    _whole_group_batches(values, fixed)
    return RunConfig.from_mapping(values)


def _whole_group_batches(values: dict[str, Any], fixed: dict[str, Any]) -> None:
    """Without the liveness exception, AReaL's, ROLL's, verl's and PR #822's admission need
    batches of whole groups (`RunConfig.startup_problems`): the batch is cut down to whole
    groups, or where it is pinned the exception is kept."""
    size, batch = values["group_size"], values["batch_size"]
    if values["liveness"] or not batch or batch <= size:
        return
    if values["admission"] not in ("areal", "roll", "outstanding", "verl"):
        return
    if "batch_size" not in fixed:
        values["batch_size"] = batch // size * size
    elif "liveness" not in fixed:
        values["liveness"] = True


def _drawn_keys(draw: st.DrawFn, group_size: int) -> dict[str, Any]:
    """Every policy key and knob `run_configs` draws, in its order of draws."""
    return {
        "group_size": group_size,
        "max_inflight": draw(st.integers(1, 3 * group_size + 2)),
        "max_off_policy_steps": draw(st.integers(0, 3)),
        "target_lag": 0,
        "staleness": draw(st.sampled_from(["per-episode", "per-group", "soft"])),
        "filter_zero_advantages": draw(st.booleans()),
        "eval_interval": draw(st.sampled_from([0, 0, 2, 3])),
        "frozen_fraction": draw(st.sampled_from([0.0, 0.0, 0.3])),
        "curriculum": draw(st.sampled_from(["all", "informative"])),
        "seed": draw(st.integers(0, 2**16)),
        "zero_output_batches": 1000,
        "admission": draw(
            st.sampled_from(
                ["none", "capacity", "areal", "verl", "outstanding", "max-lag", "slime", "roll"]
            )
        ),
        "max_lag": draw(st.integers(0, 16)),
        "async_generation_ratio": draw(st.sampled_from([0.0, 0.5, 1.0, 1.5])),
        "straggler_cut": draw(st.booleans()),
        "batch_order": draw(st.sampled_from(["fifo", "oldest-first", "roll-window"])),
        "admission_smoothing": draw(st.sampled_from([False, False, False, True])),
        "requeue": draw(st.sampled_from(["none", "none", "at-ship", "at-completion"])),
        "gate_lag": draw(st.sampled_from(["target-lag", "target-lag", "one", "zero"])),
        "stale_cancel": draw(st.sampled_from(["in-flight", "open"])),
        "stale_check": draw(st.sampled_from(["at-finalize", "after-curriculum"])),
        "queue_sweep": draw(st.sampled_from(["at-ship", "at-next-check"])),
        "overload_count": draw(st.sampled_from(["owed", "in-flight"])),
        "admission_window": draw(st.sampled_from(["fixed", "restarting"])),
        "eval_first": draw(st.booleans()),
        "staleness_threshold": draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])),
        "updates_per_sync": draw(st.sampled_from([1, 1, 1, 2, 3])),
        "ship_wait": draw(st.sampled_from(["none", "none", "last-chance"])),
        "stale_member": draw(st.sampled_from(["cancel", "cancel", "cancel", "withhold", "run-on"])),
        "leftovers": draw(st.sampled_from(["run-on", "run-on", "run-on", "abort"])),
        "group_redundancy": draw(st.sampled_from([0, 0, 0, 1, 2])),
    }


def _queue_and_rounds(draw: st.DrawFn, values: dict[str, Any], fixed: dict[str, Any]) -> None:
    """A bounded queue (sometimes) and slime's round size, unless `fixed` pins them."""
    if "queue_limit" not in fixed and values["batch_size"] and draw(st.booleans()):
        # a bounded queue just big enough to fill a batch, so that it fills
        spare = draw(st.integers(0, 2))
        eviction = draw(st.sampled_from(["oldest-episode", "oldest-group"]))
        least = least_queue_limit(values["group_size"], values["batch_size"], eviction)
        values["queue_limit"] = least + spare
        values["queue_eviction"] = eviction
    if "over_sampling_batch_size" not in fixed:  # slime: at least a batch's groups
        groups = -(-(values["batch_size"] or 1) // values["group_size"])
        values["over_sampling_batch_size"] = draw(st.sampled_from([None, groups, groups + 2]))


def _startable(values: dict[str, Any], fixed: dict[str, Any]) -> None:
    """Keys that do not combine (`RunConfig.startup_problems`) reconciled, `fixed` kept."""
    if values["ship_wait"] == "last-chance" and "ship_wait" not in fixed:
        # the wait needs PR #822's cap, and no drain (`RunConfig.startup_problems`)
        capped = values["admission"] == "outstanding" or "admission" not in fixed
        if not capped or values.get("weight_update") == "drain":
            values["ship_wait"] = "none"
        else:
            values["admission"] = "outstanding"
    elif values["ship_wait"] == "last-chance" and "admission" not in fixed:
        values["admission"] = "outstanding"
    if values["batch_order"] == "roll-window" and "updates_per_sync" not in fixed:
        values["updates_per_sync"] = 1  # ROLL's window: one update a step (startup_problems)
    if values.get("weight_update") == "drain" and values["admission"] in ("verl", "slime"):
        values["admission"] = "none"  # their budgets stall behind a drain (startup_problems)
    if values["admission"] == "slime" and "group_redundancy" not in fixed:
        values["group_redundancy"] = 0  # slime's rounds count whole groups (startup_problems)


# What a weight update does to work in flight, `recycle` and `stale_tokens`: read off the
# drawn `seed` rather than drawn anew, since a new draw would move every later one and the
# derandomized ci sample would lose the rare cases it reaches. A seed shrinks to 0: freeze,
# no recycle, no mask.
_WEIGHT_UPDATES = ("freeze", "interrupt", "drain", "interrupt", "interrupt")
_RECYCLES = (False, True, False, True)
_STALE_TOKENS = ("drop", "mask")  # where episodes have segments
_UPDATE_PAUSES = ("none", "until-live")
_STEP_ORDERS = ("ship-first", "submit-first")


def _gates_and_liveness(values: dict[str, Any], fixed: dict[str, Any]) -> None:
    """The liveness exception, the dispatch gate, no gate nor hold at all, verl's
    outstanding depth and verl-drop's queue check while sampling, read off `values["seed"]`
    as `_partial_rules` reads its keys (a seed shrinks to 0: rolloutlog's own rules)."""
    seed = values["seed"] // 40
    if "liveness" not in fixed:
        values["liveness"] = (True, True, True, False)[seed % 4]
    if "dispatch_gate" not in fixed:
        values["dispatch_gate"] = (True, True, False)[seed // 4 % 3]
    if "gate_lag" not in fixed and seed // 12 % 4 == 3:
        values["gate_lag"] = "none"
    if "outstanding_depth" not in fixed:
        values["outstanding_depth"] = (None, None, 1)[seed // 48 % 3]
    if "queue_sweep" not in fixed and seed // 144 % 3 == 2:
        values["queue_sweep"] = "while-sampling"


def _partial_rules(values: dict[str, Any], fixed: dict[str, Any]) -> None:
    """`weight_update`, `recycle`, `update_pause`, `step_order` and (where work is resumed)
    `stale_tokens`
    from `values["seed"]`, within what starts (a drain stalls behind verl's and slime's budgets;
    recycled work waits for the update, so not with a drain nor a sync of several updates:
    `RunConfig.startup_problems`; each is left as drawn and the rule falls back). A world
    with a last-chance wait (rare: it needs its cap reached) keeps the freeze it was drawn
    with."""
    seed = values["seed"]
    waits = values["ship_wait"] == "last-chance"
    if "weight_update" not in fixed:
        rule = _WEIGHT_UPDATES[seed % len(_WEIGHT_UPDATES)]
        clash = rule == "drain" and values["admission"] in ("verl", "slime")
        values["weight_update"] = "freeze" if clash or waits else rule
    if "recycle" not in fixed:
        recycle = _RECYCLES[seed // len(_WEIGHT_UPDATES) % len(_RECYCLES)] and not waits
        if recycle and values["weight_update"] == "drain" and "weight_update" not in fixed:
            values["weight_update"] = "freeze"
        values["recycle"] = (
            recycle and values["weight_update"] != "drain" and values["updates_per_sync"] == 1
        )
    if "update_pause" not in fixed:
        values["update_pause"] = _UPDATE_PAUSES[seed // 40 % len(_UPDATE_PAUSES)]
    if "step_order" not in fixed:
        values["step_order"] = _STEP_ORDERS[seed // 80 % len(_STEP_ORDERS)]
    partial = values["weight_update"] == "interrupt" or values["recycle"]
    if partial and "stale_tokens" not in fixed:  # segments exist only where work is resumed
        values["stale_tokens"] = _STALE_TOKENS[seed // 20 % len(_STALE_TOKENS)]


@st.composite
def staggered_configs(draw: st.DrawFn) -> RunConfig:
    """The per-episode case: G of 4-8 under fewer permits, small batches. Members of a group
    start at several versions and steps move while they run, so groups hold stale and fresh
    members at once."""
    group_size = draw(st.integers(4, 8))
    bound = draw(st.integers(1, 3))
    return draw(
        run_configs(
            group_size=group_size,
            max_inflight=draw(st.integers(group_size // 2, group_size)),
            batch_size=draw(st.integers(1, 4)),
            token_batch_size=None,
            staleness="per-episode",
            max_off_policy_steps=bound,
            target_lag=draw(st.integers(1, min(2, bound))),  # 0 gates too soon for the case
            # Each of these removes the case: capacity admission and straggler cuts take out
            # the stragglers, frozen groups never go stale, the curriculum and eval groups
            # slow the steps down.
            admission="none",
            straggler_cut=False,
            frozen_fraction=0.0,
            curriculum="all",
            eval_interval=0,
            # the case is about versions moving under running work: keep it running
            weight_update="freeze",
            recycle=False,
        )
    )


@st.composite
def world_logs(
    draw: st.DrawFn,
    configs: st.SearchStrategy[RunConfig] | None = None,
    max_steps: int = 150,
    single_version_groups: bool = False,
    checked: bool = True,
    restarts: bool = False,
) -> list[Event]:
    """A complete, valid log: a config, then up to `max_steps` scripted world events.

    Without `configs`, two in five worlds draw from `run_configs()` and the rest are staggered
    (`staggered_configs()`, `max_steps` to twice that, a prompt trainer). The world's own
    choices come from a seeded `random.Random`: Hypothesis's narrow integer draws lean to
    their ends and finish the oldest episode first, which leaves no stragglers. Shrinking
    still shortens the world (a shorter prefix of the same script) and simplifies the config.

    With `restarts`, the driver dies once at a random point and a new one resumes the run
    (`run_resumed`); the columnar fold hands such logs to the plain one, so it is opt-in.

    With `checked`, every property of docs/contract.md is checked on every event while the log is
    built, and the first violation raises `InvariantViolation` (`core.account`).
    """
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    # Hypothesis's own booleans lean, hence the seeded draw. Three in five default worlds
    # are staggered, longer and with a prompt trainer: about half of those reach the
    # per-episode case, so its share of a 300-log sample stays clear of its 20% floor
    # (at one in two it measured 18.7-23.3%, depending on the sample).
    staggered = configs is None and rng.random() < 0.6
    if staggered:
        config = draw(staggered_configs())
        steps = draw(st.integers(max_steps, 2 * max_steps))
    else:
        config = draw(configs if configs is not None else run_configs())
        steps = draw(st.integers(0, max_steps))
    observers = (Account(config),) if checked else ()
    return scripted_log(
        config,
        rng.randrange,
        steps,
        loop=ReactionLoop(config, observers=observers),
        single_version_groups=single_version_groups,
        prompt_trainer=True if staggered else None,
        restarts=restarts,
    )


@attrs.frozen
class Tampered:
    """A valid log with one change: `seq` is the first event that differs from the original."""

    log: list[Event]
    seq: int
    how: str  # "field <name>", "removed", "duplicated" or "swapped"
    original: list[Event]


@st.composite
def equivalence_logs(draw: st.DrawFn, /, max_steps: int = 150, **fixed: Any) -> list[Event]:
    """Logs for comparing two implementations: the usual mix, plus the cases where the
    staleness policies part ways (large G under a binding limit, frequent version jumps)
    and, a third of the time, logs with every group dispatched at one version. Keyword
    arguments pin config fields, as `run_configs`'s do."""
    wide = run_configs(
        group_size=draw(st.integers(6, 12)), max_inflight=draw(st.integers(2, 9)), **fixed
    )
    configs = draw(st.sampled_from([run_configs(**fixed), run_configs(**fixed), wide]))
    single_version = draw(st.integers(0, 2)) == 0
    return draw(world_logs(configs, max_steps, single_version_groups=single_version))


@st.composite
def tampered_logs(draw: st.DrawFn, decided_only: bool = True, max_steps: int = 80) -> Tampered:
    """A valid log with one event changed, removed, duplicated or swapped (seqs renumbered).

    With `decided_only`, only decided events are touched: `verify` must then fail at
    exactly `seq`. Otherwise world events may be touched too, for the folds' bad-input paths.
    """
    log = draw(world_logs(max_steps=max_steps))
    candidates = [
        i for i, e in enumerate(log) if i > 0 and (e.kind in DECIDED_KINDS or not decided_only)
    ]
    hypothesis_assume(bool(candidates))
    index = draw(st.sampled_from(candidates))
    how = draw(st.sampled_from(["field", "field", "field", "removed", "duplicated", "swapped"]))
    if how == "field":
        changed, name = _changed_field(draw, log[index])
        tampered = [*log[:index], changed, *log[index + 1 :]]
        return Tampered(tampered, index, f"field {name}", log)
    if how == "removed":
        tampered = log[:index] + log[index + 1 :]
    elif how == "duplicated":
        tampered = [*log[: index + 1], log[index], *log[index + 1 :]]
        index += 1
    else:
        hypothesis_assume(index + 1 < len(log) and log[index] != log[index + 1])
        tampered = [*log[:index], log[index + 1], log[index], *log[index + 2 :]]
    renumbered = [attrs.evolve(event, seq=seq) for seq, event in enumerate(tampered)]
    return Tampered(renumbered, index, how, log)


def _changed_field(draw: st.DrawFn, event: Event) -> tuple[Event, str]:
    """The event with one payload field (or its `t`) changed to another valid-typed value."""
    names = ["t", *event_fields(type(event))]
    name = draw(st.sampled_from(names))
    value = getattr(event, name)
    new: Any
    if isinstance(value, bool):
        new = not value
    elif isinstance(value, int):
        new = value + draw(st.sampled_from([-1, 1] if value > 0 else [1, 2]))
    elif isinstance(value, float):
        new = value + 0.5
    elif isinstance(value, str) and name in _ENUMS:
        new = draw(st.sampled_from([v for v in _ENUMS[name] if v != value]))
    elif isinstance(value, str):
        new = value + "x"
    elif isinstance(value, tuple):
        new = value[:-1] if value else ((0.5,) if name == "advantages" else ("g1/0",))
    else:
        new = {**value, "seed": value.get("seed", 0) + 1}  # the run config
    return attrs.evolve(event, **{name: new}), name


_ENUMS: dict[str, tuple[str, ...]] = {"reason": CANCEL_REASONS, "work": WORK_KINDS}
