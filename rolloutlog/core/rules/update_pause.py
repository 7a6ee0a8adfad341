"""Update pause rules: whether new train work and a held batch wait out a weight update.

rolloutlog's own rule (`update_pause = "none"`, and prime-rl's, whose watcher sets the new
version before it calls its observers) acts in the reaction to `version_pending(v)`: the
gate and the ship hold read the announced version, so new train work and a batch the hold
kept go out at once. Most of the field's stacks update the weights inside a synchronous
step, or pause their producer for it (AReaL's executor, verl's rollouter, ROLL's
`pause_sampling`): under `"until-live"` no train episode is dispatched and no batch ships
from `version_pending(v)` until the update is done, `version_live(v)`; the dispatcher also
waits for every episode the update interrupted to be resumed (AReaL's `agenerate` and
verl's partial rollout resubmit those before the producer resumes). Eval work goes on, as
under `weight_update = "drain"`.

The pause always ends: `version_live` and the resumptions are world events that need no
dispatch and no shipped batch.
"""

from __future__ import annotations

from typing import Final

from rolloutlog.core.state import DispatcherState
from rolloutlog.events.types import Event, VersionLive, VersionPending


def paused_until_live(live: int, version: int, interrupted: int) -> bool:
    """An update is under way: `version` announced and not yet served (`live`), or
    `interrupted` episodes not yet resumed."""
    return live < version or interrupted > 0


def drained_until_live(state: DispatcherState) -> bool:
    """`weight_update = "drain"`: an announced update waits for the train work in flight,
    so no new train work goes out until it is live (rolloutlog's own rule, and
    `"until-live"`'s, have no such wait: None in the table)."""
    return state.partial.live < state.version


# --- step order: who answers a weight update first -------------------------------------------
# The event classes the dispatcher answers before the sink (`core.decider.Combined.decide`).
# rolloutlog's order, the sink first, lets a batch the update releases ship before new work
# opens. verl's v1 step submits its prompts (`prepare_step`, trainer_base.py:509-517,
# 1420-1422) and only then samples, so its ship wait sees them in flight.
SHIP_FIRST: Final[frozenset[type[Event]]] = frozenset()
SUBMIT_FIRST: Final[frozenset[type[Event]]] = frozenset({VersionPending, VersionLive})
