"""Simulated inference: when each dispatched episode finishes, and what a pause does.

An episode starts generating when it is dispatched, or when inference resumes if a weight
update has it paused, and finishes `work_s` generation seconds later (its completion or its
failure). A weight update (`version_pending` → `version_live`) pauses inference in keep
mode: every episode in flight keeps its progress and finishes that much later. Under
`weight_update = interrupt` an episode is instead stopped (`interrupt`: its generation
seconds left are kept, its outcome unscheduled) and resubmitted (`resume`), paying a
prefill before it goes on (`runtime.sim.interrupt`).

A cancelled episode is unscheduled, except that with `late_arrival_rate` the abort races a
finishing request and loses: the episode still arrives, as a late event the deciders must
record and ignore. Memory is bounded by the episodes scheduled. The shared world
(`runtime.sim.shared_inference`) keeps its episodes the same way: both build on `Flights`
(the lookup, the cancel and its lost race are one code; each world says how long an
episode has spent).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar

import attrs

from rolloutlog.events.types import EpisodeCompleted, EpisodeFailed
from rolloutlog.runtime.sim.clock import Entry, EventQueue
from rolloutlog.runtime.sim.world import EpisodePlan

FAILURE_MESSAGE = "simulated inference failure"


@attrs.define(slots=True)
class Flight:
    """A scheduled episode: its plan, its queue entry, and its cancel reason if it lost a race."""

    episode_id: str
    plan: EpisodePlan
    entry: Entry
    cancelled: str | None = None
    left_s: float | None = None  # interrupted: generation seconds still to go
    done_s: float = 0.0  # generation seconds done at its last interruption (a prefill adds none)


def outcome(
    now: float, episode_id: str, plan: EpisodePlan, prompt_tokens: int
) -> EpisodeCompleted | EpisodeFailed:
    """The world event of an episode's planned outcome arriving at `now`."""
    if plan.failed:
        return EpisodeFailed(t=now, episode_id=episode_id, error=FAILURE_MESSAGE)
    return EpisodeCompleted(
        t=now,
        episode_id=episode_id,
        reward=plan.reward,
        prompt_tokens=prompt_tokens,
        completion_tokens=plan.completion_tokens,
    )


def cancel_reason(flight: InFlight) -> str:
    """The cancel reason of an episode still in inference when the run ended: only a
    cancelled one whose abort lost its race may be."""
    if flight.cancelled is None:
        raise ValueError(f"{flight.episode_id} is still in flight at the end of the run")
    return flight.cancelled


class InFlight(Protocol):
    """What the driver, the drainer and the interrupter read of an episode in inference."""

    @property
    def episode_id(self) -> str: ...
    @property
    def plan(self) -> EpisodePlan: ...
    @property
    def cancelled(self) -> str | None: ...
    @property
    def left_s(self) -> float | None: ...


class Tracked(Protocol):
    """What `Flights` reads and writes of an episode in inference (either world's record)."""

    episode_id: str
    plan: EpisodePlan
    cancelled: str | None
    left_s: float | None


FlightT = TypeVar("FlightT", bound=Tracked)


class Flights(ABC, Generic[FlightT]):
    """What both worlds keep alike: the episodes in inference by id, and how one is looked
    up, cancelled (or left racing). A world says how long an episode has spent, and how
    its work leaves inference (`_unschedule`)."""

    flights: dict[str, FlightT]

    def cancel(self, now: float, episode_id: str, reason: str) -> float | None:
        """Cancel an episode: seconds it had spent, or None if it will arrive late."""
        flight = self._flight(episode_id)
        if flight.cancelled is not None:
            raise ValueError(f"{episode_id} cancelled twice")
        if flight.left_s is not None:  # interrupted: nothing is generating, nothing races
            del self.flights[episode_id]
            return self._spent_interrupted(now, flight, flight.left_s)
        if flight.plan.late_if_cancelled:
            flight.cancelled = reason
            return None
        self._unschedule(now, flight)
        del self.flights[episode_id]
        return self.spent_s(now, flight)

    def racing(self, now: float) -> list[tuple[str, float]]:
        """At the end of a run: cancelled work still due to arrive late, (reason, seconds)."""
        return [(cancel_reason(f), self.spent_s(now, f)) for f in self.flights.values()]

    def plan(self, episode_id: str) -> EpisodePlan:
        """The plan of an episode in inference."""
        return self._flight(episode_id).plan

    @abstractmethod
    def spent_s(self, now: float, flight: FlightT) -> float:
        """Seconds `flight` has spent by `now` (each world counts its own)."""

    @abstractmethod
    def _spent_interrupted(self, now: float, flight: FlightT, left_s: float) -> float:
        """Seconds an interrupted episode had spent, when it is cancelled."""

    @abstractmethod
    def _unschedule(self, now: float, flight: FlightT) -> None:
        """Take a generating episode's work out of inference (it is being cancelled)."""

    def _flight(self, episode_id: str) -> FlightT:
        flight = self.flights.get(episode_id)
        if flight is None:
            raise KeyError(f"{episode_id} is not in inference")
        return flight


class Serving(Protocol):
    """What the driver asks of simulated inference: `Inference` (each episode alone) or
    `runtime.sim.shared_inference.SharedInference` (episodes share servers)."""

    @property
    def flights(self) -> Mapping[str, InFlight]: ...
    def start(self, now: float, episode_id: str, plan: EpisodePlan) -> None: ...
    def cancel(self, now: float, episode_id: str, reason: str) -> float | None: ...
    def racing(self, now: float) -> list[tuple[str, float]]: ...
    def arrive(
        self, now: float, episode_id: str
    ) -> tuple[InFlight, EpisodeCompleted | EpisodeFailed]: ...
    def pause(self, now: float, duration_s: float) -> None: ...
    def interrupt(self, now: float, episode_id: str) -> int | None: ...
    def resume(self, now: float, episode_id: str, prefill_tokens: int) -> bool: ...
    def prompt_of(self, episode_id: str) -> int: ...
    def plan(self, episode_id: str) -> EpisodePlan: ...
    def forget_group(self, group_id: str) -> None: ...


class Inference(Flights[Flight]):
    """The episodes scheduled to finish, keyed by episode id, in dispatch order."""

    def __init__(
        self,
        queue: EventQueue,
        *,
        pause_on_update: bool,
        prompt_tokens: int,
        prefill_tokens_per_s: float = 20000.0,
    ) -> None:
        self.queue = queue
        self.pause_on_update = pause_on_update
        self.prompt_tokens = prompt_tokens
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.paused_until = 0.0
        self.flights = {}

    def start(self, now: float, episode_id: str, plan: EpisodePlan) -> None:
        """Schedule a dispatched episode's outcome."""
        if episode_id in self.flights:
            raise ValueError(f"{episode_id} dispatched twice")
        due = max(now, self.paused_until) + plan.work_s
        entry = self.queue.push(due, ("episode", episode_id))
        self.flights[episode_id] = Flight(episode_id, plan, entry)

    def spent_s(self, now: float, flight: Flight) -> float:
        """Generation seconds `flight` has spent by `now` (a pause shifted its due time)."""
        remaining = flight.entry.t - max(now, self.paused_until)
        return min(max(flight.plan.work_s - remaining, 0.0), flight.plan.work_s)

    def _spent_interrupted(self, now: float, flight: Flight, left_s: float) -> float:
        """Generation seconds done before it was interrupted."""
        return flight.plan.work_s - left_s

    def _unschedule(self, now: float, flight: Flight) -> None:
        self.queue.cancel(flight.entry)

    def arrive(
        self, now: float, episode_id: str
    ) -> tuple[Flight, EpisodeCompleted | EpisodeFailed]:
        """The scheduled outcome came due: the flight, and the world event to feed."""
        flight = self.flights.pop(episode_id, None)
        if flight is None:
            raise KeyError(f"{episode_id} came due but is not scheduled")
        plan = flight.plan
        prompt = self.prompt_tokens if plan.prompt_tokens is None else plan.prompt_tokens
        return flight, outcome(now, episode_id, plan, prompt)

    def pause(self, now: float, duration_s: float) -> None:
        """A weight update starts: everything in flight finishes `duration_s` later."""
        if not self.pause_on_update or duration_s <= 0.0:
            return
        if now < self.paused_until:
            raise ValueError(f"pause at t={now} overlaps the pause until t={self.paused_until}")
        self.paused_until = now + duration_s
        for flight in self.flights.values():
            if flight.left_s is not None:
                continue
            self.queue.cancel(flight.entry)
            flight.entry = self.queue.push(flight.entry.t + duration_s, flight.entry.item)

    def interrupt(self, now: float, episode_id: str) -> int | None:
        """Stop a generating episode: its completion tokens so far (at its own token rate),
        or None if it is not generating (it arrived, was cancelled, or is interrupted)."""
        flight = self.flights.get(episode_id)
        if flight is None or flight.cancelled is not None or flight.left_s is not None:
            return None
        spent_s = max(self.spent_s(now, flight), flight.done_s)  # stopped again in its prefill
        flight.done_s = spent_s
        self.queue.cancel(flight.entry)
        flight.left_s = flight.plan.work_s - spent_s
        work_s, tokens = flight.plan.work_s, flight.plan.completion_tokens
        return tokens if work_s <= 0.0 else int(tokens * min(spent_s / work_s, 1.0))

    def resume(self, now: float, episode_id: str, prefill_tokens: int) -> bool:
        """Resubmit an interrupted episode: it finishes after the prefill of
        `prefill_tokens` and the generation it had left. False if it is no longer
        interrupted (cancelled)."""
        flight = self.flights.get(episode_id)
        if flight is None or flight.left_s is None:
            return False
        prefill_s = prefill_tokens / self.prefill_tokens_per_s
        due = max(now, self.paused_until) + prefill_s + flight.left_s
        flight.entry = self.queue.push(due, ("episode", episode_id))
        flight.left_s = None
        return True

    def forget_group(self, group_id: str) -> None:
        """One server with no placement: nothing to forget."""

    def prompt_of(self, episode_id: str) -> int:
        """The prompt tokens of a scheduled episode."""
        prompt = self._flight(episode_id).plan.prompt_tokens
        return self.prompt_tokens if prompt is None else prompt
