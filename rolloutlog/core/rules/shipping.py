"""Shipping rules: whether a full batch that the ship hold lets go waits for more work.

The sink cuts batch `step` once it is full and the hold lifts; under `ship_wait =
"last-chance"` (tinker-cookbook PR #822's `collect_batch`) it first waits for every open
train group holding a member at its last chance: dispatched at a version `d` with
`(step − 1) − d ≥ max_off_policy_steps`, so that at the next step it would be past the
bound. The batch ships when those groups have finalized (their `group_scored` is a readiness
check), stalest first when the run orders its batches so. Eval and frozen work never ages,
so it is never waited for.

The wait cannot hold the run forever: the hold has lifted, so the dispatch gate is open
(both read `(step − 1) − version > lag`), a group's owed members are always admitted, and
every member in flight arrives or is cancelled.
"""

from __future__ import annotations

from rolloutlog.core.staleness import is_stale
from rolloutlog.core.state import SinkState


def ship_at_once(state: SinkState) -> bool:
    """rolloutlog's rule: a full batch the hold lets go ships; nothing to wait for."""
    return False


def waits_for_last_chance(state: SinkState) -> bool:
    """Whether an open train group of the policy being trained holds a member at its last
    chance for batch `state.step` (in flight, or arrived while its siblings run)."""
    bound, after = state.config.max_off_policy_steps, state.step + 1  # stale once it ships
    for group in state.groups.values():
        if not group.train or group.frozen:
            continue
        if any(
            is_stale(v, after, bound, train=True, frozen=False) for v in group.inflight.values()
        ):
            return True
        if any(is_stale(a.version, after, bound, train=True, frozen=False) for a in group.arrived):
            return True
    return False
