"""Hypothesis strategies for the simulator: whole scenarios, built valid by construction.

`world_scenarios()` is a swarm strategy: each example switches every world feature on or off
on its own (failures, late arrivals, version jumps, a moving limit, overload cuts, eval
groups, frozen sources, token batches, ...) before drawing its values, so that rare
combinations are reached without every example carrying every feature.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rolloutlog.runtime.sim.scenario import Scenario, scenario_from_mapping


def _drawn(draw: st.DrawFn, fixed: dict[str, Any]) -> dict[str, Any]:
    """Pinned keys: a plain value as is, a strategy drawn."""
    return {
        key: draw(value) if isinstance(value, st.SearchStrategy) else value
        for key, value in fixed.items()
    }


@st.composite
def run_tables(draw: st.DrawFn, **fixed: Any) -> dict[str, Any]:
    """A `[run]` table: small groups and batches, binding limits, tight bounds.

    Keyword arguments pin keys, to a value or to a strategy to draw it from.
    """
    group_size = draw(st.integers(1, 8))
    run: dict[str, Any] = {
        "group_size": group_size,
        "max_inflight": draw(st.integers(1, 3 * group_size + 4)),
        "max_off_policy_steps": draw(st.integers(0, 3)),
        "staleness": draw(st.sampled_from(["per-episode", "per-group", "soft"])),
        "filter_zero_advantages": draw(st.booleans()),
        "tasks": draw(st.sampled_from([4, 64, 1024])),
        "zero_output_batches": draw(st.sampled_from([3, 10])),
    }
    run["target_lag"] = draw(st.integers(0, min(2, run["max_off_policy_steps"])))
    if draw(st.booleans()):
        run["eval_interval"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        run["frozen_fraction"] = draw(st.sampled_from([0.2, 0.5, 1.0]))
    if draw(st.integers(0, 4)) == 0:
        run["token_batch_size"] = draw(st.integers(200, 4000))
    else:
        run["batch_size"] = draw(st.integers(1, 16))
    if draw(st.integers(0, 3)) == 0:
        run["curriculum"] = "informative"
    if draw(st.integers(0, 3)) == 0:
        run["admission_smoothing"] = True
    # The policy knobs: every property must hold under each of them and their mixes.
    run["admission"] = draw(st.sampled_from(["none", "capacity", "areal"]))
    run["straggler_cut"] = draw(st.booleans())
    run["batch_order"] = draw(st.sampled_from(["fifo", "oldest-first"]))
    run.update(_drawn(draw, fixed))
    return run


@st.composite
def world_tables(draw: st.DrawFn, **fixed: Any) -> dict[str, Any]:
    """A `[world]` table; each feature is on in about half of the examples."""
    world: dict[str, Any] = {
        "task_length_tokens": draw(st.sampled_from([16, 256, 1024])),
        "duration": draw(st.sampled_from(["lognormal", "pareto", "exponential"])),
        "reward": draw(st.sampled_from(["bernoulli", "fractional"])),
        "train_step_s": draw(st.sampled_from([0.0, 1.0, 10.0, 60.0])),
        "weight_update_s": draw(st.sampled_from([0.0, 0.5, 5.0])),
        "pause_inference_on_update": draw(st.booleans()),
    }
    world["duration_shape"] = draw(
        st.floats(1.2, 4.0) if world["duration"] == "pareto" else st.floats(0.1, 1.5)
    )
    optional = {
        "failure_rate": st.floats(0.0, 0.5),
        "late_arrival_rate": st.floats(0.0, 1.0),
        "version_skip_rate": st.floats(0.0, 1.0),
        "concurrency_slowdown": st.floats(0.0, 3.0),
        "limit_interval_s": st.floats(5.0, 120.0),
        "overload_interval_s": st.floats(5.0, 120.0),
        "solve_rate_alpha": st.floats(0.1, 5.0),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            world[key] = draw(values)
    if "limit_interval_s" in world:
        world["limit_min_fraction"] = draw(st.floats(0.0, 1.0))
    if "overload_interval_s" in world:
        world["overload_max_fraction"] = draw(st.floats(0.0, 1.0))
    world.update(_drawn(draw, fixed))
    return world


@st.composite
def world_scenarios(
    draw: st.DrawFn,
    max_steps: int = 12,
    run: dict[str, Any] | None = None,
    world: dict[str, Any] | None = None,
) -> Scenario:
    """A complete scenario and seed; `run` / `world` pin keys of either table."""
    data = {
        "steps": draw(st.integers(1, max_steps)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "run": draw(run_tables(**(run or {}))),
        "world": draw(world_tables(**(world or {}))),
    }
    return scenario_from_mapping(data, name="drawn")
