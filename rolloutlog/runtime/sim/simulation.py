"""The simulate driver: a seeded world in virtual time, feeding the core's reaction loop.

The driver is thin, as the design asks: it pops the earliest happening from the virtual
clock (an episode finishing or failing, the trainer publishing or going live, the
controller), turns it into a world event, feeds it to `ReactionLoop.feed`, and reacts to
what the deciders appended: a dispatched episode is planned and scheduled, a cancelled one
unscheduled, a shipped batch goes to the trainer. After `steps` shipped batches (or when
the sink reports zero output) it feeds `run_finished`, and the loop cancels what is owed.

Nothing here reads a clock, global random state, or the iteration order of a set: the
same scenario and seed give the same events, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

import rolloutlog
from rolloutlog.core.loop import Observer, ReactionLoop
from rolloutlog.core.rules.group_shape import members
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    Event,
    LimitSet,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)
from rolloutlog.runtime.sim.clock import Entry, EventQueue
from rolloutlog.runtime.sim.colocation import Colocation
from rolloutlog.runtime.sim.controller import Controller
from rolloutlog.runtime.sim.drain import Drainer
from rolloutlog.runtime.sim.inference import Inference
from rolloutlog.runtime.sim.interrupt import Interrupter
from rolloutlog.runtime.sim.metrics import SimMetrics
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.shared_inference import SharedInference
from rolloutlog.runtime.sim.streams import RandomStreams
from rolloutlog.runtime.sim.trace_world import TraceController, TraceTimes, TraceWorld
from rolloutlog.runtime.sim.trainer import Trainer
from rolloutlog.runtime.sim.world import EpisodeWorld, WorldModel

WORLD_EVENTS_PER_STEP_MAX = 200_000

EventsHook = Callable[[list[Event]], None]
StepHook = Callable[[int], None]


class SimulationBoundError(RuntimeError):
    """The world fed more events than any step can need: the run does not make progress."""


@attrs.frozen(kw_only=True)
class SimResult:
    """How a simulated run ended, and the simulator's own metrics (`SimMetrics.as_dict`)."""

    scenario: Scenario
    finished_reason: str
    virtual_seconds: float
    events: int
    world_events: int
    steps_shipped: int
    digest: bytes | None
    metrics: dict[str, Any]
    wasted_series: list[tuple[float, float]]
    drawn_races: int = 0  # `SimMetrics.drawn_races`: races drawn at the late-arrival rate
    drawn_late: int = 0  # of them, lost and arrived (a finished rollout discarded)


def _world_parts(
    scenario: Scenario, queue: EventQueue, colocation: Colocation | None
) -> tuple[EpisodeWorld, Trainer, Controller]:
    """The episodes' world, the trainer and the controller: drawn from the scenario's seed,
    or a recorded world (`rolloutlog whatif`: its own seed, the run keeps the log's)."""
    world, trace, run = scenario.world, scenario.trace, scenario.run
    if trace is None:
        streams = RandomStreams(scenario.seed)
        episodes: EpisodeWorld = WorldModel(world, run.tasks, streams)
        trainer = Trainer(
            world,
            streams["trainer"],
            queue,
            updates_per_sync=run.updates_per_sync,
            colocation=colocation,
        )
        controller = Controller(world, run, streams["controller"], queue)
        return episodes, trainer, controller
    streams = RandomStreams(trace.seed)
    episodes = TraceWorld(trace, world, streams)
    # shared: batch times from the fitted knobs (they depend on the load), else as recorded
    times = None if world.inference == "shared" else TraceTimes(trace, world, streams["trainer"])
    trainer = Trainer(
        world, streams["trainer"], queue, times, run.updates_per_sync, colocation=colocation
    )
    controller = TraceController(trace, world, run, streams["controller"], queue)
    return episodes, trainer, controller


class Simulation:
    """One run of a scenario; `run()` drives it to the end and returns a `SimResult`.

    `on_events` receives every batch of appended events (one world event and what it set
    off), for a log writer; `observers` see each event as the loop appends it (a summary,
    the invariant checker); `on_step` is told each shipped step (progress). The loop's
    digest chain is kept only with `digest=True` (else `SimResult.digest` is None): a
    written log is digested where it is read, by replay and verify.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        observers: tuple[Observer, ...] = (),
        on_events: EventsHook | None = None,
        on_step: StepHook | None = None,
        digest: bool = False,
    ) -> None:
        self.scenario = scenario
        self.on_events, self.on_step = on_events, on_step
        self.loop = ReactionLoop(scenario.run, observers=observers, digest=digest)
        self.queue = EventQueue()
        self.inference, colocation = build_inference(self.queue, scenario)
        drain = scenario.run.weight_update == "drain"
        self.drainer = Drainer(self.queue, self.inference) if drain else None
        self.world: EpisodeWorld
        self.world, self.trainer, self.controller = _world_parts(scenario, self.queue, colocation)
        world = scenario.world
        self.interrupter = (
            None
            if scenario.run.weight_update != "interrupt" and not scenario.run.recycle
            else Interrupter(
                self.queue,
                self.inference,
                self._frozen,
                at_update=scenario.run.weight_update == "interrupt",
                shared_prefill=world.prefill_shared and world.inference == "independent",
            )
        )
        self.metrics = SimMetrics()
        self.now = 0.0
        self.world_events = 0
        self.steps_shipped = 0
        self.finish_reason: str | None = None
        self._heartbeat_due = True
        self._live_due: tuple[float, int] | None = None  # a version_live to schedule
        self._reactions: dict[str, Callable[[Any], None]] = {
            "group_opened": self._on_group_opened,
            "episode_dispatched": self._on_dispatched,
            "episodes_cancelled": self._on_cancelled,
            "episode_dropped": lambda e: self.metrics.on_dropped(e.episode_id, e.reason),
            "group_scored": self._on_scored,
            "batch_shipped": self._on_shipped,
        }

    def run(self) -> SimResult:
        """Drive the world until `steps` batches shipped (or the run cannot go on)."""
        if self.loop.next_seq != 0:
            raise RuntimeError("a Simulation runs once; build a new one")
        self._feed(self._run_started())
        self.controller.start()
        since_step = 0
        # The sink's zero-output rule (`ReactionLoop.zero_output_reason`), asked directly
        # after each world event, as the loop's body is: one call each, not two.
        stop_reason, pair = self.loop.decider.sink.stop_reason, self.loop.state
        pop = self.queue.pop
        while self.finish_reason is None:
            entry = pop()  # the next happening, else the tick the core asks for
            if entry is None:
                event: Event | None = self._heartbeat()
                if event is None:
                    raise self._no_progress("nothing left to happen")
            else:
                self._heartbeat_due = True
                self.now = entry.t
                event = self._happen(entry)
                if event is None:  # a happening that makes no world event
                    continue
            shipped = self.steps_shipped
            self._feed(event)
            since_step = 0 if self.steps_shipped > shipped else since_step + 1
            if since_step > WORLD_EVENTS_PER_STEP_MAX:
                raise self._no_progress(f"{WORLD_EVENTS_PER_STEP_MAX} world events")
            if self.finish_reason is None and stop_reason(pair.sink) is not None:
                self.finish_reason = "zero_output"
        self._feed(RunFinished(t=self.now, reason=self.finish_reason))
        self.metrics.on_finished(self.now, self.inference.racing(self.now))
        return self._result()

    def _no_progress(self, what: str) -> SimulationBoundError:
        """The one line for a run that cannot go on, naming the rule that starves it."""
        return SimulationBoundError(
            f"{what} without a shipped batch (t={self.now:.1f}s; "
            f"{self.loop.stall_reason()}): the run makes no progress"
        )

    def _run_started(self) -> RunStarted:
        return RunStarted(
            t=0.0,
            config=self.scenario.run.to_dict(),
            seed=self.scenario.seed,
            schema_version=SCHEMA_VERSION,
            code_version=f"rolloutlog {rolloutlog.__version__}",
        )

    def _heartbeat(self) -> LimitSet | None:
        """Nothing is scheduled: feed the tick the core asks for (admission smoothing), once;
        a second stall in a row is real. The timer is here; the rule is the core's
        (`ReactionLoop.next_tick`)."""
        due = self.loop.next_tick(self.now) if self._heartbeat_due else None
        if due is None:
            return None
        self._heartbeat_due = False
        self.now = due
        return self.loop.tick(due)

    def _happen(self, entry: Entry) -> Event | None:
        """The world event of a happening that came due (None: the trainer skipped a publish,
        or a shared server's batch moved on and no episode arrived). An episode's outcome
        arriving, the most frequent, is asked first and taken here."""
        kind, key = entry.item
        if kind == "server":  # a shared server's batch moved on; an episode may arrive
            if not isinstance(self.inference, SharedInference):
                raise ValueError("a server happening, but inference is not shared")
            key = self.inference.serve(self.now, key)
            if key is None:
                return None
        elif kind != "episode":
            return self._happen_otherwise(kind, key)
        episode_id: str = key  # the episode that arrives
        flight, event = self.inference.arrive(self.now, episode_id)
        self.metrics.on_arrived(episode_id, flight.plan, flight.cancelled)
        if self.drainer is not None:
            self.drainer.left(self.now, episode_id)
        return event

    def _happen_otherwise(self, kind: str, key: Any) -> Event | None:
        """The world event of a happening other than an arrival."""
        if kind == "trained":
            publish = self.trainer.trained(self.now, key)
            if publish is None:
                return None
            if self.drainer is not None:
                self.drainer.announced(self.now, publish)
            else:
                self.inference.pause(self.now, publish.update_s)
            if self.interrupter is not None:
                self.interrupter.announced(self.now)
            if self.drainer is None:  # scheduled once the announcement's reaction is in
                self._live_due = (self.now + publish.update_s, publish.version)
            return VersionPending(t=self.now, version=publish.version)
        if kind == "live":
            self.trainer.live(self.now, key)
            if self.interrupter is not None:
                self.interrupter.went_live(self.now, key)
            return VersionLive(t=self.now, version=key)
        if self.interrupter is not None and kind in ("interrupt", "resume"):
            happen = self.interrupter.interrupt if kind == "interrupt" else self.interrupter.resume
            return happen(self.now, key)
        return self.controller.fire(self.now, kind)

    def _frozen(self, episode_id: str) -> bool:
        """Whether an in-flight episode's group samples from a frozen source."""
        return self.loop.dispatcher_state.groups[episode_id.rpartition("/")[0]].frozen

    def _feed(self, event: Event) -> None:
        appended = self.loop.feed(event, fresh=True)  # every world event here is built to feed
        self.world_events += 1
        if self.on_events is not None:
            self.on_events(appended)
        reactions = self._reactions
        for decided in appended[1:]:
            react = reactions.get(decided.kind)
            if react is not None:
                react(decided)
        if self._live_due is not None:  # after what the announcement set off, so an update
            due, version = self._live_due  # of 0 s goes live after its interruptions
            self._live_due = None
            self.queue.push(due, ("live", version))

    def _on_group_opened(self, event: Any) -> None:
        size = members(event.group_size, self.scenario.run.group_redundancy)
        self.world.open_group(event.group_id, event.task_id, size, train=event.work == "train")

    def _on_dispatched(self, event: Any) -> None:
        inflight = len(self.inference.flights)
        plan = self.world.plan(
            event.group_id, event.member, inflight, self.scenario.run.max_inflight
        )
        self.inference.start(self.now, event.episode_id, plan)
        self.metrics.on_dispatched(plan)

    def _on_cancelled(self, event: Any) -> None:
        self.world.unscheduled_cancelled(event.group_id, event.unscheduled)
        for episode_id in event.episode_ids:
            self.metrics.on_race(self.inference.plan(episode_id), event.reason)
            spent_s = self.inference.cancel(self.now, episode_id, event.reason)
            if spent_s is not None:
                self.metrics.on_cancelled(event.reason, spent_s)
            if self.drainer is not None:
                self.drainer.left(self.now, episode_id)

    def _on_scored(self, event: Any) -> None:
        self.metrics.on_scored(event)
        self.inference.forget_group(event.group_id)

    def _on_shipped(self, event: Any) -> None:
        self.metrics.on_shipped(event)
        if self.interrupter is not None and self.scenario.run.recycle:
            self.interrupter.shipped(self.now)
        self.trainer.shipped(self.now, event.step, len(event.trained_ids), event.tokens)
        self.steps_shipped = event.step
        if self.on_step is not None:
            self.on_step(event.step)
        if event.step >= self.scenario.steps and self.finish_reason is None:
            self.finish_reason = "steps"

    def _result(self) -> SimResult:
        busy_s = self.trainer.busy_seconds(self.now)
        return SimResult(
            scenario=self.scenario,
            finished_reason=self.finish_reason or "unknown",
            virtual_seconds=self.now,
            events=self.loop.next_seq,
            world_events=self.world_events,
            steps_shipped=self.steps_shipped,
            digest=self.loop.digest,
            metrics=self.metrics.as_dict(self.now, busy_s),
            wasted_series=list(self.metrics.wasted_series.points),
            drawn_races=self.metrics.drawn_races,
            drawn_late=self.metrics.drawn_late,
        )


def build_inference(
    queue: EventQueue, scenario: Scenario
) -> tuple[Inference | SharedInference, Colocation | None]:
    """The scenario's inference (`world.inference`), and the trainer's coupling to it when
    they are colocated."""
    world = scenario.world
    if world.inference == "independent":
        inference = Inference(
            queue,
            pause_on_update=world.pause_inference_on_update,
            prompt_tokens=world.prompt_tokens,
            prefill_tokens_per_s=world.prefill_tokens_per_s,
        )
        return inference, None
    shared = SharedInference(queue, world)
    return shared, Colocation(world.colocation_coupling, shared) if world.colocated else None


def simulate(
    scenario: Scenario,
    *,
    observers: tuple[Observer, ...] = (),
    on_events: EventsHook | None = None,
    on_step: StepHook | None = None,
    digest: bool = False,
) -> SimResult:
    """Run `scenario` to the end; see `Simulation`."""
    return Simulation(
        scenario, observers=observers, on_events=on_events, on_step=on_step, digest=digest
    ).run()
