"""The requeue scenario that `tests/core/test_requeue.py` and
`tests/replay/test_replay_requeue.py` both run: a tight world (G = 2, bound 0, no lag)
under a preset, and the steps that leave g2 stale at its completion."""

from __future__ import annotations

from typing import Any

from rolloutlog.core.presets import preset_overrides
from tests.core.test_scenarios import Run

# G = 2, bound 0, no lag: every step a group waits through makes it stale.
TIGHT: dict[str, Any] = {
    "group_size": 2,
    "max_inflight": 4,
    "batch_size": 2,
    "max_off_policy_steps": 0,
    "target_lag": 0,
}


# tinker's requeue rule alone, its task reopened first (slime's order): tinker's workers
# (`admission = "workers"`, a batch's groups at once) would run one group at a time here,
# and its builder queue (`requeue_order = "behind-fresh"`) would reopen the task later.
# rolloutlog's gate at lag 0 (tinker has none) keeps each step where the scenarios put it.
TINKER_REQUEUE: dict[str, Any] = {
    "admission": "none",
    "requeue_order": "first",
    "dispatch_gate": True,
    "gate_lag": "target-lag",
}


def requeue_run(policy: str, **config: Any) -> Run:
    return Run(**{**TIGHT, **preset_overrides(policy), **config})


def stale_at_completion(run: Run) -> None:
    """g1 ships batch 1 (step 2) while g2 (and g3, on g1's first permit), opened at v0, still
    run: g2 completes at age 1 > 0 before any version is published; v1 lifts the gate and
    g4 opens."""
    run.complete("g1/0", "g1/1")
    run.complete("g2/0", "g2/1")
    run.publish(1)
