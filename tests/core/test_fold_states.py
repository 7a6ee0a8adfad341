"""What the deciders hold after each event of a generated log, seen three ways.

The sink keeps a running total of queued tokens; the modules' `evolve` and the loop a
driver runs must reach the same states as the fold (the columnar fold's own fingerprint is
checked against the loop's in tests/replay/test_columnar_digest.py). Each is compared
after every event, so a count kept wrong shows at the event that put it wrong.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core import dispatcher, sink
from rolloutlog.core.config import RunConfig
from rolloutlog.core.digest import fingerprint
from rolloutlog.core.loop import DISPATCHER, SINK, ReactionLoop
from rolloutlog.core.presets import rules_for
from rolloutlog.events.jsonl import read_jsonl
from rolloutlog.events.schema import SCHEMA_VERSION, events_to_batch
from rolloutlog.events.types import (
    UNSEQUENCED,
    WORLD_KINDS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunStarted,
)
from rolloutlog.replay.columnar import ColumnarFold
from rolloutlog.replay.fold import LogFold, fold_events
from rolloutlog.testing.strategies import run_configs, world_logs

WINDOW = dispatcher.SMOOTHING_WINDOW_S


@given(world_logs(max_steps=60))
def test_evolve_and_the_queued_tokens_agree_with_the_fold(log: list[Event]) -> None:
    fold = LogFold.from_run_started(log[0])
    sink_state = SINK.initial_state(fold.config)
    dispatcher_state = DISPATCHER.initial_state(fold.config)
    for event in log:
        fold.apply(event)
        sink_state = sink.evolve(fold.rules, sink_state, event)
        dispatcher_state = dispatcher.evolve(fold.rules, dispatcher_state, event)
        held = fingerprint(fold.dispatcher_state, fold.sink_state)
        evolved = fingerprint(dispatcher_state, sink_state)
        assert evolved == held, event
        queued = sum(entry.tokens for entry in fold.sink_state.queue.values())
        assert fold.sink_state.queued_tokens == queued, event


@given(world_logs(max_steps=60))
def test_the_zero_output_guard_counts_what_the_log_shows(log: list[Event]) -> None:
    """The idle work the guard counts, recounted from the log: the size of every train group
    finalized since the last one that admitted something that will train, and how many of
    those were scored but rejected, or had no fresh successful member to score. A group
    admitted with every member already past the bound (stale arrivals judged after the
    curriculum) admits nothing that trains: the queue check drops it; nor does one whose
    members are all withheld (`stale_member = "withhold"`: scored, then dropped)."""
    _idle_recounted(log)


def test_a_group_whose_only_member_is_withheld_is_idle_work() -> None:
    """Found by the dev profile: a prime-rl-withhold group admitted with its one member
    withheld as stale trains nothing; the sink counted it idle, the recount did not."""
    data = Path(__file__).parent / "data" / "withheld_group_idle.jsonl"
    with data.open() as lines:
        _idle_recounted(list(read_jsonl(lines)))


def test_a_resumed_masked_episode_is_judged_by_its_last_segment() -> None:
    """Found by the nightly profile: under `stale_tokens = mask` with `interrupt`, g2/0
    (stamped v0) resumed under v1 and trains at step 2 with bound 0, its first segment
    masked. The sink reset its count; the recount read the stamp and counted g2 idle."""
    data = Path(__file__).parent / "data" / "masked_resume_idle.jsonl"
    with data.open() as lines:
        _idle_recounted(list(read_jsonl(lines)))


def _idle_recounted(log: list[Event]) -> None:
    config = RunConfig.from_mapping(log[0].config, startable=False)  # type: ignore[union-attr]
    fold = LogFold.from_run_started(log[0])
    recount = _IdleRecount(
        config,
        withheld={
            e.episode_id for e in log if isinstance(e, EpisodeDropped) and e.reason == "withheld"
        },
    )  # withheld members are dropped right after their group's scoring: none of them trains
    completions = _Completions()
    for event in log:
        fold.apply(event)
        recount.see(event)
        completions.see(event)
        sink_state = fold.sink_state
        assert (sink_state.completed, sink_state.completed_tokens) == (
            completions.count,
            completions.tokens,
        ), event
        idle = sink_state.idle
        assert (idle.episodes, idle.stale, idle.rejected_groups, idle.unscored_groups) == (
            recount.episodes,
            recount.stale,
            recount.rejected,
            recount.unscored,
        ), event


@attrs.define
class _Completions:
    """What the guard's estimate of a token batch's episodes reads: the completions of
    episodes in flight at the sink (a late one, cancelled first, is not counted) and their
    prompt and completion tokens."""

    inflight: set[str] = attrs.Factory(set)
    count: int = 0
    tokens: int = 0

    def see(self, event: Event) -> None:
        if isinstance(event, EpisodeDispatched):
            self.inflight.add(event.episode_id)
        elif isinstance(event, EpisodesCancelled):
            self.inflight.difference_update(event.episode_ids)
        elif isinstance(event, EpisodeFailed):
            self.inflight.discard(event.episode_id)
        elif isinstance(event, EpisodeCompleted) and event.episode_id in self.inflight:
            self.inflight.discard(event.episode_id)
            self.count += 1
            self.tokens += event.prompt_tokens + event.completion_tokens


@attrs.define
class _IdleRecount:
    """The guard's idle counts, from the log alone. Stale work of an idle group: its members
    cancelled as stale (scheduled or not), those dropped before it was scored, and, when it
    was admitted with nothing left to train, every member it admitted."""

    config: RunConfig
    withheld: set[str]
    sizes: dict[str, int] = attrs.Factory(dict)  # train groups: G + r dispatched
    frozen: dict[str, bool] = attrs.Factory(dict)
    stale_of: dict[str, int] = attrs.Factory(dict)  # open train groups' stale work so far
    stamps: dict[str, int] = attrs.Factory(dict)  # the version each age is read from
    step: int = 1
    episodes: int = 0
    stale: int = 0
    rejected: int = 0
    unscored: int = 0

    def see(self, event: Event) -> None:
        if isinstance(event, GroupOpened) and event.work == "train":
            members = event.group_size + self.config.group_redundancy
            self.sizes[event.group_id], self.frozen[event.group_id] = members, event.frozen
            self.stale_of[event.group_id] = 0
        elif isinstance(event, EpisodeDispatched):
            self.stamps[event.episode_id] = event.policy_version
        elif isinstance(event, EpisodeResumed) and self.config.stale_tokens == "mask":
            self.stamps[event.episode_id] = event.policy_version  # a drop reads the last segment
        elif isinstance(event, BatchShipped):
            self.step = event.step + 1
        elif isinstance(event, EpisodesCancelled) and event.group_id in self.stale_of:
            if event.reason == "stale":
                self.stale_of[event.group_id] += len(event.episode_ids) + event.unscheduled
        elif isinstance(event, EpisodeDropped):
            group_id = event.episode_id.rpartition("/")[0]
            if group_id in self.stale_of:  # an arrival dropped before its group's scoring
                self.stale_of[group_id] += 1
        elif isinstance(event, GroupScored) and event.group_id in self.sizes:
            self._scored(event, self.stale_of.pop(event.group_id))

    def _scored(self, event: GroupScored, stale: int) -> None:
        trains = {e for e in event.episode_ids if e not in self.withheld}
        if event.admitted and not _all_past_the_bound(
            self.config, event, trains, self.stamps, self.step, self.frozen
        ):
            self.episodes = self.stale = self.rejected = self.unscored = 0
            return
        self.episodes += self.sizes[event.group_id]
        self.stale += stale + (len(event.episode_ids) if event.admitted else 0)
        self.rejected += bool(event.episode_ids) and not event.admitted
        self.unscored += not event.episode_ids


def _all_past_the_bound(
    config: RunConfig,
    event: GroupScored,
    trains: set[str],
    stamps: dict[str, int],
    step: int,
    frozen: dict[str, bool],
) -> bool:
    """Every admitted member not withheld is older than the bound now, where the run drops
    for age (so none is left to train, when all are withheld)."""
    if (config.staleness == "soft" or frozen[event.group_id]) and trains:
        return False
    bound = config.max_off_policy_steps
    return all((step - 1) - stamps[e] > bound for e in trains)


@given(world_logs(max_steps=60))
def test_a_driver_loop_remakes_the_log_and_its_ticks_restate_the_limit(log: list[Event]) -> None:
    """Fed the log's world events as a driver builds them (unsequenced, held by the driver),
    the loop appends the recorded log and leaves the driver's events as they were; a tick
    (admission smoothing's timer) restates the current limit at its time, and one is owed
    only when smoothing is on and nothing is in flight before the end: at the start of the
    next window, never now or earlier. The loop's stop reason is the sink's, and its digest
    chain ends where replay's fold of the log ends."""
    first = log[0]
    assert isinstance(first, RunStarted)
    loop = ReactionLoop.from_run_started(first)
    appended: list[Event] = []
    for recorded in (event for event in log if event.kind in WORLD_KINDS):
        world = attrs.evolve(recorded, seq=UNSEQUENCED)
        appended += loop.feed(world)
        assert world.seq == UNSEQUENCED
        tick = loop.tick(recorded.t)
        assert (tick.t, tick.max_inflight) == (recorded.t, loop.dispatcher_state.limit)
        due = loop.next_tick(recorded.t)
        state = loop.dispatcher_state
        if not loop.config.admission_smoothing or state.finished or state.inflight:
            assert due is None
        else:
            assert due is not None
            assert recorded.t < due <= recorded.t + WINDOW
            # fixed windows open on multiples of WINDOW; restarting ones (prime-rl's) at
            # WINDOW after the event that opened them
            assert due % WINDOW == 0 or loop.config.admission_window == "restarting"
        assert loop.zero_output_reason() == sink.zero_output_reason(loop.sink_state)
    assert appended == log
    fold = fold_events(log).fold  # replay's own digest chain over the recorded log
    assert fold is not None
    assert loop.digest == fold.digest


@given(run_configs(admission_smoothing=True), st.floats(0, 1e6), st.booleans())
def test_an_idle_smoothed_dispatcher_owes_a_tick_at_the_next_window(
    config: RunConfig, now: float, smoothing: bool
) -> None:
    """Before anything is dispatched the dispatcher is idle: with smoothing on the tick is
    due at the start of the next window (a restarting window: a window from now, as none is
    open), with it off never; once episodes are in flight, or the run has finished, no tick
    is owed."""
    config = attrs.evolve(config, admission_smoothing=smoothing)
    idle = dispatcher.initial_state(config)
    due = dispatcher.next_tick(rules_for(config), idle, now)
    if not smoothing:
        assert due is None
        return
    if config.admission_window == "fixed":
        assert due == (int(now // WINDOW) + 1) * WINDOW
    else:  # a restarting window counts from now, as none is open yet
        assert due == now + WINDOW
    loop = ReactionLoop(config)
    started = RunStarted(
        t=now, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="test"
    )
    loop.feed(started)
    assert loop.dispatcher_state.inflight
    assert loop.next_tick(now) is None


# the columnar fold hands a run that segments episodes to the plain fold at seq 0
FREEZE_WORLDS = world_logs(run_configs(weight_update="freeze", recycle=False), max_steps=30)


@given(FREEZE_WORLDS, st.floats(0.0, 1.0))
def test_the_columnar_fold_counts_kinds_as_the_plain_fold(log: list[Event], cut: float) -> None:
    """The columnar fold counts each record batch's kinds at once (`RunSummary.count_kinds`)
    where the plain fold counts event by event: over a log cut into two batches anywhere,
    both end with the same summary and the same digest."""
    plain = fold_events(log).fold
    assert plain is not None
    at = max(1, round(cut * len(log)))
    batches = [events_to_batch(part) for part in (log[:at], log[at:]) if part]
    columnar = ColumnarFold.from_first_batch(batches[0])
    for batch in batches:
        columnar.apply_batch(batch)
    columnar.finish()
    assert columnar.state.run.events == len(log)
    assert columnar.summary() == plain.summary()
    assert columnar.digest == plain.digest


@given(world_logs(run_configs(weight_update="interrupt", stale_tokens="mask"), max_steps=60))
def test_the_sink_keeps_the_segments_of_an_episode_only_while_it_is_in_flight(
    log: list[Event],
) -> None:
    """Under `mask` the sink keeps an interrupted episode's segments for its arrival. One
    cancelled in flight (stale, overload, shutdown) never arrives: its books close then,
    or they would grow with every cancellation of a long run."""
    first = log[0]
    assert isinstance(first, RunStarted)
    config = RunConfig.from_mapping(first.config)
    state, rules = SINK.initial_state(config), rules_for(config)
    for event in log:
        state = sink.evolve(rules, state, event)
        assert state.pieces.keys() <= state.inflight.keys(), event
