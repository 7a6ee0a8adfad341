"""The dispatcher, restated naively: every answer is computed by scanning the record.

On `run_finished` it cancels all that is owed (`shutdown`) and decides nothing after. On
`run_resumed` it cancels what was in flight (`restart`), nothing unscheduled. On
`version_pending` it cancels stale in-flight work (none under soft staleness) and straggler
cuts; on `overload_cut` whole groups, youngest first; on `batch_shipped` straggler cuts; on a
group's G-th arrival, under `group_redundancy` r, the members past G it still owes
(`redundant`). Any event that draws no cancellation fills free permits: the oldest open
group that owes members first, then new groups (an owed eval group before train, a requeued
task before a fresh one). Under a requeue rule nothing is cancelled as stale. Permits freed
by its own cancellations are refilled when it sees those cancellations.
"""

from __future__ import annotations

from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodesCancelled,
    Event,
    GroupOpened,
)
from rolloutlog.testing.reference.admission import FIELD_ROOMS
from rolloutlog.testing.reference.masking import goes_on_under
from rolloutlog.testing.reference.oversampling import leftovers, slime_room
from rolloutlog.testing.reference.record import Episode, Group, Record
from rolloutlog.testing.reference.rules import age, past_bound, task

UNLIMITED = 10**18
WINDOW_S = 5.0


def decide(record: Record, event: Event) -> list[Event]:
    if event.kind == "run_finished":
        return [
            _cancel(g, g.in_flight(), g.unscheduled(), "shutdown", event.t)
            for g in record.open_groups()
        ]
    if record.finished:
        return []
    cancellations: list[Event] = []
    if event.kind == "run_resumed":  # what was in flight died with the old driver
        cancellations = [
            _cancel(g, g.in_flight(), 0, "restart", event.t)
            for g in record.open_groups()
            if g.in_flight()
        ]
    elif event.kind == "version_pending":
        cancellations = _before_update(record, event.t)
    elif event.kind == "overload_cut":
        cancellations = _overload(record, event.n, event.t)  # type: ignore[union-attr]
    elif event.kind == "batch_shipped":
        cancellations = leftovers(record, event.t) or [
            c for g in record.open_groups() if (c := _straggler(record, g, [], event.t))
        ]
    elif event.kind in ("episode_completed", "episode_failed"):
        cancellations = _redundant(record, event)
    return cancellations or _fill(record, event.t)


def _redundant(record: Record, event: Event) -> list[Event]:
    """A group's G-th arrival (a failed one counts) cancels all it still owes."""
    if event.seq not in record.natural_arrivals:
        return []
    group = record.groups[event.episode_id.rpartition("/")[0]]  # type: ignore[union-attr]
    owed = group.size - group.accounted()
    if len(group.arrived()) != record.config.group_size or not owed:
        return []
    return [_cancel(group, group.in_flight(), group.unscheduled(), "redundant", event.t)]


def _cancel(
    group: Group, episodes: list[Episode], unscheduled: int, reason: str, t: float
) -> EpisodesCancelled:
    return EpisodesCancelled(
        t=t,
        group_id=group.group_id,
        episode_ids=tuple(e.episode_id for e in episodes),
        unscheduled=unscheduled,
        reason=reason,  # type: ignore[arg-type]
    )


def _stale_step(record: Record) -> int:
    """The step a stale cancellation reads: the current one, or (prime-rl) the one the
    update found, before the batch it released."""
    return record.update_step() if record.config.stale_step == "before-release" else record.step


def _before_update(record: Record, t: float) -> list[Event]:
    settings, step = record.config, _stale_step(record)
    out: list[Event] = []
    for group in record.open_groups():
        stale = [
            e
            for e in group.in_flight()
            if settings.staleness != "soft"
            and settings.requeue == "none"  # a requeue rule lets stale groups run to the end
            and settings.stale_member == "cancel"  # withhold, run-on: none cancelled for age
            and past_bound(settings, group.train, group.frozen, goes_on_under(record, e), step)
        ]
        waiting = _stale_unscheduled(record, group)
        if (stale or waiting) and settings.staleness == "per-group":
            out.append(_cancel(group, group.in_flight(), group.unscheduled(), "stale", t))
            continue
        if stale or waiting:
            out.append(_cancel(group, stale, waiting, "stale", t))
        cut = _straggler(record, group, stale, t, group.unscheduled() - waiting)
        if cut is not None:
            out.append(cut)
    return out


def _stale_unscheduled(record: Record, group: Group) -> int:
    """With `stale_cancel = "open"`, members not yet dispatched are cancelled as stale too
    when the version they would carry (the group's start version per-group, the current
    one per-episode) is already past the bound."""
    settings = record.config
    if settings.stale_cancel != "open" or group.unscheduled() == 0:
        return 0
    if settings.stale_member != "cancel":  # withhold, run-on: never cancelled for its age
        return 0
    version = group.start_version if settings.staleness == "per-group" else record.version
    stale = past_bound(settings, group.train, group.frozen, version, _stale_step(record))
    return group.unscheduled() if stale else 0


def _straggler(
    record: Record, group: Group, spared: list[Episode], t: float, waiting: int | None = None
) -> EpisodesCancelled | None:
    """An arrived completed member at exactly the bound would be lost after the next batch:
    cancel what the group still owes so it finalizes now (`waiting`: its unscheduled members
    not already cancelled in the same answer)."""
    settings = record.config
    if not settings.straggler_cut or not group.train or group.frozen:
        return None
    at_risk = any(
        e.status == "completed" and age(e.version, record.step) == settings.max_off_policy_steps
        for e in group.members
    )
    if not at_risk:
        return None
    rest = [e for e in group.in_flight() if e not in spared]
    waiting = group.unscheduled() if waiting is None else waiting
    if not rest and waiting == 0:
        return None
    return _cancel(group, rest, waiting, "straggler", t)


def _overload(record: Record, n: int, t: float) -> list[Event]:
    """Whole groups, youngest (last opened) first, until at least `n` owed are cancelled.
    With `overload_count = "in-flight"`: only train groups with members in flight, the
    youngest by their oldest in-flight member, until `n` in-flight members are cancelled."""
    if record.config.overload_count == "in-flight":
        return _overload_in_flight(record, n, t)
    out: list[Event] = []
    cancelled = 0
    for group in reversed(record.open_groups()):
        if cancelled >= n:
            break
        out.append(_cancel(group, group.in_flight(), group.unscheduled(), "overload", t))
        cancelled += len(group.in_flight()) + group.unscheduled()
    return out


def _overload_in_flight(record: Record, n: int, t: float) -> list[Event]:
    oldest: dict[str, int] = {}  # group -> when (in dispatch order) its oldest in-flight left
    for position, episode in enumerate(record.in_flight()):
        oldest.setdefault(episode.group_id, position)
    train = [g for g in record.groups.values() if g.group_id in oldest and g.train]
    out: list[Event] = []
    cancelled = 0
    for group in sorted(train, key=lambda g: oldest[g.group_id], reverse=True):
        if cancelled >= n:
            break
        out.append(_cancel(group, group.in_flight(), group.unscheduled(), "overload", t))
        cancelled += len(group.in_flight())
    return out


def _restarting_growth(record: Record) -> int:
    """prime-rl's window opens at an event and restarts at the first event 5 s or more
    after that; it counts admissions, and a natural arrival takes one back (not below 0)."""
    start: float | None = None
    growth = 0
    for event in record.history:
        if start is None or event.t >= start + WINDOW_S:  # as a tick at `start + 5` reads it
            start, growth = event.t, 0
        if event.kind == "episode_dispatched":
            growth += 1
        elif event.seq in record.natural_arrivals:
            growth = max(0, growth - 1)
    return growth


def _window_growth(record: Record) -> int:
    """Dispatches minus natural arrivals since the current 5-second window began."""
    window = record.history[-1].t // WINDOW_S
    growth = 0
    for event in reversed(record.history):
        if event.t // WINDOW_S != window:
            break
        if event.kind == "episode_dispatched":
            growth += 1
        elif event.seq in record.natural_arrivals:
            growth -= 1
    return growth


def _free(record: Record) -> int:
    settings = record.config
    free = record.limit - len(record.in_flight())
    if settings.admission_smoothing:
        burst = max(settings.group_size, settings.max_inflight // 10)
        restarting = settings.admission_window == "restarting"
        growth = _restarting_growth(record) if restarting else _window_growth(record)
        free = min(free, burst - growth)
    return free


def _train_room(record: Record) -> int:
    """Train episodes that may go out now: none past the gate, while a drained update
    waits or while a paused one is under way, else capacity's room."""
    settings = record.config
    read = record.gate_version() if settings.gate_check == "ship-and-live" else record.version
    if (record.step - 1) - read > settings.gate:
        return 0
    if settings.weight_update == "drain" and record.live < record.version:
        return 0
    if record.recycled:  # recycled work resumes first
        return 0
    if settings.update_pause == "until-live" and record.updating():
        return 0
    if settings.admission != "capacity" and settings.admission not in FIELD_ROOMS:
        return UNLIMITED
    train = [e for e in record.episodes.values() if record.group_of(e).train]
    if settings.batch_size is not None:
        per_batch = settings.batch_size
    else:
        completed = [e for e in train if e.status == "completed"]
        if not completed:
            return slime_room(record, None) if settings.admission == "slime" else UNLIMITED
        tokens = sum(e.tokens for e in completed)
        per_batch = max(1, -(-(settings.token_batch_size or 0) * len(completed) // tokens))
    field_room = FIELD_ROOMS.get(settings.admission)
    if field_room is not None:
        return field_room(record, per_batch)
    in_flight = sum(e.status == "in flight" for e in train)
    unscored = sum(
        e.status in ("completed", "failed") and not record.group_of(e).scored for e in train
    )
    queued = len(record.queue())
    batches_left = settings.max_off_policy_steps + record.version + 1 - record.batches
    room = batches_left * per_batch - (queued + unscored + in_flight)
    return room if in_flight or not settings.liveness else max(room, 1)


def _evals_owed(record: Record) -> int:
    interval = record.config.eval_interval
    due = sum(1 for s in range(1, record.step) if interval and s % interval == 0)
    opened = sum(1 for g in record.groups.values() if g.work == "eval")
    return max(0, due - opened)


def _fill(record: Record, t: float) -> list[Event]:
    """Free permits go to open groups that owe members, oldest first, then to new groups
    (owed eval groups before train). With `eval_first`, all that is owed to eval (open eval
    groups, then the owed ones) goes first, and only then train."""
    settings = record.config
    free = _free(record)
    if free <= 0:
        return []
    train = _train_room(record)
    out: list[Event] = []
    number, evals = len(record.groups), _evals_owed(record)
    owed, turns = record.requeue_line()
    for only in ("eval", "train") if settings.eval_first else (None,):
        if free <= 0:
            break
        for group in record.open_groups():
            if only is not None and group.work != only:
                continue
            count = min(free, group.unscheduled(), train if group.train else free)
            if count <= 0:
                continue
            version = group.start_version if settings.staleness == "per-group" else record.version
            out += _dispatch(group.group_id, len(group.members), count, version, t)
            free -= count
            train -= count if group.train else 0
        room = 0 if only == "eval" else train
        while free > 0 and (evals > 0 or room > 0):
            work = "eval" if evals > 0 else "train"
            evals -= work == "eval"
            number += 1
            # a requeued task, oldest first: before a fresh one, or on its turn in the queue
            if work == "train" and next(turns):
                again = owed.pop(0)
                task_id, env, frozen = again.task_id, again.env, again.frozen
            else:
                task_id, env, frozen = task(settings, number, work)
            group_id = f"g{number}"
            out.append(
                GroupOpened(
                    t=t,
                    group_id=group_id,
                    work=work,  # type: ignore[arg-type]
                    env=env,
                    task_id=task_id,
                    group_size=settings.group_size,
                    policy_version=record.version,
                    step=record.step,
                    frozen=frozen,
                )
            )
            size = settings.group_size + settings.group_redundancy
            count = min(free, size, room if work == "train" else free)
            out += _dispatch(group_id, 0, count, record.version, t)
            free -= count
            room -= count if work == "train" else 0
        train = room if only != "eval" else train
    return out


def _dispatch(group_id: str, first: int, count: int, version: int, t: float) -> list[Event]:
    return [
        EpisodeDispatched(
            t=t, episode_id=f"{group_id}/{m}", group_id=group_id, member=m, policy_version=version
        )
        for m in range(first, first + count)
    ]
