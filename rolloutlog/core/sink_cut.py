"""The sink's batch cut: the sweep of stale queued episodes, the ship hold, the cut.

At a readiness check (`core.sink`'s `_decide_check`, where the run's rule runs one) the
sink drops the swept queued episodes that are stale, then cuts batch `step` from the queue
in the run's batch order once it is full, unless the run is over, the trainer lags too far
behind (the ship hold), a weight update is not live yet (the update pause) or work at its
last chance is still on its way (the ship wait).
"""

from __future__ import annotations

from collections.abc import Iterable

from rolloutlog.core.rules.acceptance import held_back
from rolloutlog.core.rules.composition import take
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.scoring import is_zero_advantage
from rolloutlog.core.staleness import rollout_age
from rolloutlog.core.state import Queued, SinkState
from rolloutlog.events.types import BatchShipped, EpisodeDropped, Event


def sweep_and_cut(
    rules: Rules, state: SinkState, swept: Iterable[str] | None, t: float
) -> list[Event]:
    """Drop the `swept` queued episodes (None: the whole queue) that are stale (the step
    advanced, or they were queued stale), then cut if a batch is full.

    A cut never ships work the step's sweep would drop: when the check swept only part of
    the queue and the cut would take a stale episode, the step's whole-queue sweep is still
    owed (under `step_order = "submit-first"` a group finalized by the dispatcher's
    cancellations is checked before the ship that moved the step is), so it runs first. A
    whole-queue sweep leaves nothing stale to cut: its cut is not looked over again."""
    whole = swept is None
    out, queue = _sweep(rules, state, state.queue if swept is None else swept, state.queue, t)
    cut = _cut(rules, state, queue, t)
    if cut and not whole and _ships_stale(rules, state, queue, cut[0]):
        more, queue = _sweep(rules, state, list(queue), queue, t)
        out.extend(more)
        cut = _cut(rules, state, queue, t)
    out.extend(cut)
    return out


def _sweep(
    rules: Rules, state: SinkState, swept: Iterable[str], queue: dict[str, Queued], t: float
) -> tuple[list[Event], dict[str, Queued]]:
    """The drops of the `swept` episodes of `queue` that are stale, and the queue without them."""
    bound, step = state.config.max_off_policy_steps, state.step
    reason = rules.swept_reason()
    out: list[Event] = []
    dropped: set[str] = set()
    for episode_id in swept:
        queued = queue.get(episode_id)
        if queued is not None and rules.queued_stale(queued, step, bound):
            age = rollout_age(queued.version, step)
            out.append(EpisodeDropped(t=t, episode_id=episode_id, reason=reason, age=age))
            dropped.add(episode_id)
    if dropped:
        queue = {e: q for e, q in queue.items() if e not in dropped}
    return out, queue


def _ships_stale(rules: Rules, state: SinkState, queue: dict[str, Queued], cut: Event) -> bool:
    """Whether batch `cut` would train an episode the step's sweep drops."""
    bound, step = state.config.max_off_policy_steps, state.step
    stale = rules.queued_stale
    return isinstance(cut, BatchShipped) and any(
        stale(queue[e], step, bound) for e in cut.episode_ids
    )


def _cut(rules: Rules, state: SinkState, queue: dict[str, Queued], t: float) -> list[Event]:
    """Cut batch `step` from the oldest queued episodes once it is full and may ship."""
    config = state.config
    if state.finished:
        return []  # the run is over: what finalizes at shutdown is scored, never trained
    if held_back(rules, state):
        return []  # the ship hold or the update pause (`acceptance.held_back`)
    if rules.ship_waits(state):
        return []  # ship wait: work at its last chance is still on its way (`ship_wait`)
    cut = take(rules.batch_order, config, queue, state.step)
    if not cut:
        return []
    trained = [
        e
        for e in cut
        if not (config.filter_zero_advantages and is_zero_advantage(queue[e].advantage))
    ]
    masked, bound = rules.masked, config.max_off_policy_steps  # masked: None under drop
    shipped = BatchShipped(
        t=t,
        step=state.step,
        episode_ids=tuple(cut),
        trained_ids=tuple(trained),
        tokens=sum(queue[e].tokens for e in trained),
        masked_tokens=0
        if masked is None
        else sum(masked(queue[e], state.step, bound) for e in trained),
    )
    after = state.step + 1  # the step the leftovers are dropped at, once the batch shipped
    left = rules.queue_leftovers(queue, cut)  # slime: what the full batch left, lost
    drops = (
        EpisodeDropped(
            t=t, episode_id=e, reason="leftover", age=rollout_age(queue[e].version, after)
        )
        for e in left
    )
    return [shipped, *drops]
