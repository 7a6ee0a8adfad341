"""In-flight cancellation rules: stale, straggler, overload, shutdown, restart.

Each rule reads the dispatcher state and answers `episodes_cancelled` events, one per
group and rule; none changes state (the dispatcher's `evolve` applies them when appended).
Where a run's policy chooses between rules (per-episode or per-group staleness, straggler
cuts or none), the dispatcher calls the one its preset table chose (`core.presets`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import attrs

from rolloutlog.core.rules.table import Rules
from rolloutlog.core.staleness import at_last_chance, is_stale
from rolloutlog.core.state import DispatcherState, OpenGroup
from rolloutlog.events.types import CancelReason, EpisodesCancelled, Event


def before_weight_update(rules: Rules, state: DispatcherState, t: float) -> list[Event]:
    """Cancel the stale in-flight train episodes of each group, then cut stragglers, as
    the run's staleness rule says (`stale_members` or `stale_groups`)."""
    out: list[Event] = []
    cancel_stale, stale_in_flight = rules.cancel_stale, rules.stale_in_flight
    cancels = rules.cancels_stale_work()
    for group in state.groups.values():
        stale = stale_in_flight(rules, state, group) if cancels else ()
        out.extend(cancel_stale(rules, state, group, stale, t))
    return out


def cancel_stale_work() -> bool:
    """Stale work is cancelled at a version update, as the staleness rule says."""
    return True


def never_cancel_stale() -> bool:
    """prime-rl #2960 (`stale_member = "withhold"`) and verl's v1 `drop` (`"run-on"`):
    nothing is cancelled for its age, in flight or unscheduled; every member runs to its
    end, and the sink withholds it (withhold) or drops it at finalize as stale (run-on)."""
    return False


def _stale_unscheduled(rules: Rules, state: DispatcherState, group: OpenGroup) -> int:
    """The unscheduled members to cancel as stale, where the run cancels stale work at all."""
    return rules.stale_unscheduled(rules, state, group) if rules.cancels_stale_work() else 0


def stale_members(
    rules: Rules, state: DispatcherState, group: OpenGroup, stale: tuple[str, ...], t: float
) -> list[Event]:
    """Per-episode: exactly the stale in-flight members; siblings keep running and
    unscheduled members are dispatched later at the then-current version. Then the
    straggler rule, for what is left."""
    out: list[Event] = []
    unscheduled = _stale_unscheduled(rules, state, group)
    if stale or unscheduled:
        out.append(_members(group, stale, unscheduled, "stale", t))
    cut = rules.cut_stragglers(state, group, stale, t)
    if cut is not None and unscheduled:  # the stale cancellation took the unscheduled
        cut = attrs.evolve(cut, unscheduled=0) if cut.episode_ids else None
    if cut is not None:
        out.append(cut)
    return out


def stale_groups(
    rules: Rules, state: DispatcherState, group: OpenGroup, stale: tuple[str, ...], t: float
) -> list[Event]:
    """Per-group: the whole group of any group whose (shared) dispatch version is stale;
    a group with nothing stale is left to the straggler rule, as per-episode."""
    if stale or _stale_unscheduled(rules, state, group):
        return [_whole_group(group, "stale", t)]
    return stale_members(rules, state, group, stale, t)


def stale_kept(
    rules: Rules, state: DispatcherState, group: OpenGroup, stale: tuple[str, ...], t: float
) -> list[Event]:
    """Soft: stale in-flight members keep running (nothing is cancelled for its age); the
    straggler rule still applies, as per-episode."""
    return stale_members(rules, state, group, (), t)


def unscheduled_kept(rules: Rules, state: DispatcherState, group: OpenGroup) -> int:
    """Unscheduled members are never cancelled as stale: they go out when permits free,
    stamped as the run's staleness rule says, even if that stamp is already stale."""
    return 0


def unscheduled_if_stale(rules: Rules, state: DispatcherState, group: OpenGroup) -> int:
    """prime-rl drops every open group whose members would go out stale, one with only
    unscheduled members too: the unscheduled members to cancel, if the version they would
    carry (`Rules.stamp`) is past the bound now."""
    if not group.unscheduled or not group.train or group.frozen:
        return 0
    version = rules.stamp(group.start_version, state.version)
    bound = state.config.max_off_policy_steps
    step = rules.stale_step(state)
    return group.unscheduled if is_stale(version, step, bound, train=True, frozen=False) else 0


def current_step(state: DispatcherState) -> int:
    """The stale cancellation reads the step after any batch the update's `version_pending`
    released (the sink answers first)."""
    return state.step


def step_before_release(state: DispatcherState) -> int:
    """prime-rl's watcher calls the dispatcher's `on_version_pending` before the
    orchestrator's, which wakes a batch the ship hold held (watcher.py:130-132,
    orchestrator.py:427, 995-1000 at 559b447): its stale cancellation reads the step the
    update found, and a group stale only against the next step runs on (its insertion check
    voids it later)."""
    return state.update_step


def after_batch_shipped(rules: Rules, state: DispatcherState, t: float) -> list[Event]:
    """The step advanced: abort the leftovers where the run's rule does (slime), else cut
    the stragglers of groups whose arrivals are now at risk."""
    aborted = rules.abort_leftovers(state, t)
    if aborted:
        return aborted
    cut_stragglers = rules.cut_stragglers
    cuts = (cut_stragglers(state, group, (), t) for group in state.groups.values())
    return [cut for cut in cuts if cut is not None]


def overload_in_flight(state: DispatcherState, n: int, t: float) -> list[Event]:
    """prime-rl's cut: whole train groups with members in flight, youngest first by their
    oldest in-flight member's dispatch, until at least `n` in-flight episodes are cancelled
    (unscheduled members go with their group but free no permit, so they do not count)."""
    order: dict[str, None] = {}  # groups by their oldest in-flight member, in dispatch order
    for group_id in state.inflight.values():  # dispatch order: a dict keeps insertion order
        order.setdefault(group_id, None)
    victims: list[OpenGroup] = []
    shed = 0
    for group_id in reversed(order):
        group = state.groups[group_id]
        if shed >= n:
            break
        if group.train:
            victims.append(group)
            shed += len(group.inflight)
    return _whole_groups(victims, "overload", t)


def overload(state: DispatcherState, n: int, t: float) -> list[Event]:
    """Drop whole groups, youngest first, until at least `n` owed episodes are cancelled.

    A group's age is its oldest member's dispatch time; member 0 is dispatched when the
    group opens, so age order is opening order and the youngest group is the last opened.
    """
    victims: list[OpenGroup] = []
    owed = 0
    for group in reversed(state.groups.values()):
        if owed >= n:
            break
        victims.append(group)
        owed += group.owed()
    return _whole_groups(victims, "overload", t)


def shutdown(state: DispatcherState, t: float) -> list[Event]:
    """The run ends: cancel everything still owed, so every group finalizes."""
    return _whole_groups(state.groups.values(), "shutdown", t)


def restart(state: DispatcherState, t: float) -> list[Event]:
    """A new driver resumed the run: whatever was in flight died with the old one. Cancel
    exactly those members; unscheduled ones stay owed and are dispatched as usual."""
    return [
        _members(group, tuple(group.inflight), 0, "restart", t)
        for group in state.groups.values()
        if group.inflight
    ]


def at_risk(state: DispatcherState, group: OpenGroup) -> bool:
    """Whether a completed member of `group` is fresh now but past the bound after the next
    batch ships (its age is exactly the bound), so waiting for stragglers would lose it."""
    if not group.train or group.frozen:
        return False
    bound, step = state.config.max_off_policy_steps, state.step
    return any(at_last_chance(version, step, bound) for version in group.arrived_versions)


def stale_in_flight(rules: Rules, state: DispatcherState, group: OpenGroup) -> tuple[str, ...]:
    """The in-flight train members past the bound at the current step: cancelled as stale."""
    if not group.train or group.frozen:
        return ()
    bound, step, goes_on = (
        state.config.max_off_policy_steps,
        rules.stale_step(state),
        rules.goes_on_under,
    )
    versions: Iterable[tuple[str, int]] = group.inflight.items()  # drop: each as its stamp
    if goes_on is not None:
        versions = ((e, goes_on(rules, state, e, v)) for e, v in versions)
    return tuple(e for e, v in versions if is_stale(v, step, bound, train=True, frozen=False))


def the_version_it_goes_on_under(
    rules: Rules, state: DispatcherState, episode_id: str, stamp: int
) -> int:
    """Mask: an in-flight episode is as stale as the version its next tokens come from,
    which is what a drop at its end will read: under `interrupt` (`Rules.interrupts`), and
    for one interrupted (recycled) and not yet resumed, the version being announced;
    otherwise the version it last resumed under, or its stamp."""
    partial = state.partial
    if rules.interrupts or episode_id in partial.interrupted:
        return state.version
    return partial.resumed.get(episode_id, stamp)


def run_to_completion(rules: Rules, state: DispatcherState, group: OpenGroup) -> tuple[str, ...]:
    """Under a requeue rule (tinker, slime-lag) nothing is cancelled as stale: a stale group
    runs to its end, and the sink discards it whole and requeues its task."""
    return ()


def straggler_cut(
    state: DispatcherState, group: OpenGroup, exclude: Collection[str], t: float
) -> EpisodesCancelled | None:
    """Cancel what an at-risk group still owes (whole-group semantics); `exclude` are
    members a stale cancellation of the same answer already covers."""
    if not at_risk(state, group):
        return None
    remaining = tuple(e for e in group.inflight if e not in exclude)
    if not remaining and not group.unscheduled:
        return None
    return _members(group, remaining, group.unscheduled, "straggler", t)


def no_straggler_cut(
    state: DispatcherState, group: OpenGroup, exclude: Collection[str], t: float
) -> EpisodesCancelled | None:
    """Without `straggler_cut`, a group waits for all its members."""
    return None


def _whole_groups(groups: Iterable[OpenGroup], reason: CancelReason, t: float) -> list[Event]:
    return [_whole_group(group, reason, t) for group in groups if group.owed()]


def _whole_group(group: OpenGroup, reason: CancelReason, t: float) -> EpisodesCancelled:
    return _members(group, tuple(group.inflight), group.unscheduled, reason, t)


def _members(
    group: OpenGroup, episode_ids: tuple[str, ...], unscheduled: int, reason: CancelReason, t: float
) -> EpisodesCancelled:
    return EpisodesCancelled(
        t=t,
        group_id=group.group_id,
        episode_ids=episode_ids,
        unscheduled=unscheduled,
        reason=reason,
    )
