"""The simulated world under `weight_update = interrupt` (docs/contract.md, "Weight updates
and work in flight").

When an update is announced, inference aborts every episode then generating that is not
from a frozen source: each is reported with its completion tokens so far, at its own token
rate (its completion tokens over its generation seconds), once the deciders' reaction to
the announcement (stale cancellations) is in. When the update goes live, each interrupted
episode is resubmitted under the new version: it pays a prefill of its prompt and tokens
so far at `prefill_tokens_per_s` (in the shared world, on its server: `runtime.sim.server`),
then the generation it had left; with `prefill_shared`
the resumptions of one update share that rate in turn, as one engine's prefill queue does
(the k-th waits for the tokens of the k − 1 before it). Under `recycle` a
shipped batch aborts every train episode then generating the same way (reason `recycle`),
resumed with the others at the next update. The happenings are queue entries at the time
they happen, so they follow the event that made them in order. Under `freeze` without
`recycle` nothing here is scheduled.
"""

from __future__ import annotations

from collections.abc import Callable

from rolloutlog.events.types import EpisodeInterrupted, EpisodeResumed, InterruptReason
from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.inference import Serving


class Interrupter:
    """Schedules and makes the interruptions and resumptions of one simulated run."""

    def __init__(
        self,
        queue: EventQueue,
        inference: Serving,
        frozen: Callable[[str], bool],
        *,
        at_update: bool = True,
        shared_prefill: bool = False,
    ) -> None:
        """`at_update`: an announced update interrupts (`weight_update = interrupt`); else
        only shipped batches do (`recycle` under `freeze`). `shared_prefill`: the
        resumptions of one update queue for the prefill rate."""
        self.queue, self.inference = queue, inference
        self.at_update, self.shared_prefill = at_update, shared_prefill
        self.queued_tokens = 0  # shared prefill: tokens resubmitted at the last version_live
        self.frozen = frozen  # whether an episode's group samples from a frozen source
        self.interrupted: dict[str, int] = {}  # episode -> tokens so far, until resumed

    def announced(self, now: float) -> None:
        """An update was announced: abort what is generating now, after the reaction."""
        if not self.at_update:
            return
        for flight in self.inference.flights.values():  # cancelled ones only race
            if flight.cancelled is None and not self.frozen(flight.episode_id):
                self.queue.push(now, ("interrupt", (flight.episode_id, "update")))

    def shipped(self, now: float) -> None:
        """A batch shipped (`recycle`): abort the train work generating now."""
        for flight in self.inference.flights.values():
            if flight.cancelled is None and flight.left_s is None and flight.plan.train:
                self.queue.push(now, ("interrupt", (flight.episode_id, "recycle")))

    def interrupt(self, now: float, key: tuple[str, InterruptReason]) -> EpisodeInterrupted | None:
        """The abort lands: the world event, or None if the episode no longer generates."""
        episode_id, reason = key
        tokens = self.inference.interrupt(now, episode_id)
        if tokens is None:
            return None
        self.interrupted[episode_id] = tokens
        return EpisodeInterrupted(
            t=now, episode_id=episode_id, completion_tokens=tokens, reason=reason
        )

    def went_live(self, now: float, version: int) -> None:
        """The update is live: resubmit every interrupted episode under `version`."""
        self.queued_tokens = 0
        for episode_id in self.interrupted:
            self.queue.push(now, ("resume", (episode_id, version)))

    def resume(self, now: float, key: tuple[str, int]) -> EpisodeResumed | None:
        """The resubmission is served: the world event, or None if it was cancelled."""
        episode_id, version = key
        tokens = self.interrupted.pop(episode_id)
        if episode_id not in self.inference.flights:  # cancelled while interrupted
            return None
        prefill_tokens = self.inference.prompt_of(episode_id) + tokens
        if self.shared_prefill:  # it waits for the prefills resubmitted before it
            self.queued_tokens += prefill_tokens
            prefill_tokens = self.queued_tokens
        if not self.inference.resume(now, episode_id, prefill_tokens):
            return None
        return EpisodeResumed(t=now, episode_id=episode_id, policy_version=version)
