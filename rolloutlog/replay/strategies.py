"""Hypothesis strategies for run configurations and valid logs, built by construction.

Public so that a future change to the deciders can be checked against the previous one
the same way the project's own suites do (see `replay.equivalence`). Needs hypothesis
(the `test` extra).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.core.invariants import InvariantChecker
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import Event
from rolloutlog.replay.scripted_world import scripted_log


@st.composite
def run_configs(draw: st.DrawFn, **fixed: Any) -> RunConfig:
    """Small configurations that exercise every rule: binding limits, large G, tight bounds.

    Keyword arguments pin fields (for example `staleness="per-group"`).
    """
    group_size = draw(st.integers(1, 8))
    values: dict[str, Any] = {
        "group_size": group_size,
        "max_inflight": draw(st.integers(1, 3 * group_size + 2)),
        "max_off_policy_steps": draw(st.integers(0, 3)),
        "target_lag": 0,
        "staleness": draw(st.sampled_from(["per-episode", "per-group"])),
        "filter_zero_advantages": draw(st.booleans()),
        "eval_interval": draw(st.sampled_from([0, 0, 2, 3])),
        "frozen_fraction": draw(st.sampled_from([0.0, 0.0, 0.3])),
        "curriculum": draw(st.sampled_from(["all", "informative"])),
        "seed": draw(st.integers(0, 2**16)),
        "zero_output_batches": 1000,
    }
    if draw(st.integers(0, 4)) == 0:
        values["token_batch_size"] = draw(st.integers(16, 400))
        values["batch_size"] = None
    else:
        values["batch_size"] = draw(st.integers(1, 12))
    values["target_lag"] = draw(st.integers(0, min(2, values["max_off_policy_steps"])))
    values.update(fixed)
    return RunConfig.from_mapping(values)


@st.composite
def world_logs(
    draw: st.DrawFn,
    configs: st.SearchStrategy[RunConfig] | None = None,
    max_steps: int = 150,
    single_version_groups: bool = False,
    checked: bool = True,
) -> list[Event]:
    """A complete, valid log: a config, then up to `max_steps` scripted world events.

    With `checked`, every property of DESIGN.md is checked on every event while the log is
    built, and the first violation raises `InvariantViolation`.
    """
    config = draw(configs if configs is not None else run_configs())
    steps = draw(st.integers(0, max_steps))
    observers = (InvariantChecker(config),) if checked else ()
    return scripted_log(
        config,
        lambda n: draw(st.integers(0, n - 1)),
        steps,
        loop=ReactionLoop(config, observers=observers),
        single_version_groups=single_version_groups,
    )
