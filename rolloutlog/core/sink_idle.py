"""The sink's zero-output guard: the finalized train work since something was last admitted,
and why the run should stop when N batches' worth of it admitted nothing.

A run whose every group comes out stale, rejected by its curriculum or with no fresh
successful member would otherwise run forever without training; the sink counts that work
at each train group's scoring (`count_scored`, in `state.idle`), and the loop asks
`zero_output_reason` after each world event.
"""

from __future__ import annotations

from rolloutlog.core.rules.table import Rules
from rolloutlog.core.sink_withhold import withheld_members
from rolloutlog.core.state import IdleWork, SinkGroup, SinkState
from rolloutlog.events.types import GroupScored


def count_scored(rules: Rules, state: SinkState, group: SinkGroup, event: GroupScored) -> None:
    """A train group scored, its admitted members already queued: anything that will train
    resets the count; otherwise its members are idle work, counted by why."""
    stale_admitted = 0
    if event.admitted:
        bound, step = state.config.max_off_policy_steps, state.step
        withheld = withheld_members(rules, state, group, group.arrived)  # about to drop too
        queue, stale = state.queue, rules.queued_stale
        if not all(e in withheld or stale(queue[e], step, bound) for e in event.episode_ids):
            state.idle = IdleWork()  # something will train: work came out (the first found)
            return
        stale_admitted = len(event.episode_ids)
    idle = state.idle  # nothing admitted, or all of it stale (the queue check drops it)
    idle.episodes += group.size
    idle.stale += group.stale_cancelled + sum(a.dropped for a in group.arrived) + stale_admitted
    idle.rejected_groups += bool(event.episode_ids) and not event.admitted
    idle.unscored_groups += not event.episode_ids


def zero_output_reason(state: SinkState) -> str | None:
    """Why the run should stop, when N batches' worth of finalized work admitted nothing.

    Work is counted in finalized episodes, cancelled ones included, so a run whose work is
    all cancelled stops too. With token batches, a batch is worth `token_batch_size` over
    the mean tokens of the completed episodes so far (one group before any completed).
    """
    config, idle = state.config, state.idle
    limit, per_batch = config.zero_output_batches, config.batch_size
    if idle.episodes < limit * (_episodes_per_batch(state) if per_batch is None else per_batch):
        return None
    return (
        f"no group admitted for training in {idle.episodes} finalized episodes "
        f"({limit} batches' worth): "
        f"{idle.stale} episodes dropped or cancelled as stale, "
        f"{idle.rejected_groups} groups rejected by curriculum {config.curriculum!r}, "
        f"{idle.unscored_groups} groups with no fresh successful member. "
        "Check max_off_policy_steps (staleness drops), the curriculum, or task difficulty."
    )


def _episodes_per_batch(state: SinkState) -> float:
    """With token batches: a batch's worth of episodes, estimated."""
    config = state.config
    if state.completed == 0:
        return config.group_size
    return (config.token_batch_size or 0) * state.completed / max(1, state.completed_tokens)
