"""Inference as a shared resource (`world.inference = "shared"`): episodes compete for servers.

A dispatched episode carries its work: its prompt, the tokens it decodes before its
outcome (all of its completion, or the fraction where it fails) and its environment
seconds. The router places it on a server (`runtime.sim.router`), where it waits, is
prefilled, and decodes in the running batch (`runtime.sim.server`); then it spends its
environment seconds off the server and arrives. How long that takes is an outcome of what
else shares the server, so an episode's seconds are measured at its arrival (dispatch to
outcome, waits and pauses included), not planned at dispatch.

It offers the driver what `runtime.sim.inference.Inference` does (start, cancel, arrive,
pause, interrupt, resume), so the deciders, the drainer and the interrupter are the same
under either world. An interrupted episode leaves its server with its tokens so far and,
resumed, is resubmitted with them as part of its prompt: it pays their prefill again
(less what the prefix cache holds). An abort that loses its race leaves the request
generating until its completion arrives late, still holding its server's batch and cache.
"""

from __future__ import annotations

import math
from functools import partial

from rolloutlog.events.types import EpisodeCompleted, EpisodeFailed
from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.inference import Flights, outcome
from rolloutlog.runtime.sim.router import Router
from rolloutlog.runtime.sim.server import DecodeCurve, Request, Server, ServerSpec
from rolloutlog.runtime.sim.world import EpisodePlan
from rolloutlog.runtime.sim.world_config import WorldConfig

ARRIVAL_EPSILON_S = 1e-9  # an arrival this close after a server's present falls at it


def server_spec(world: WorldConfig) -> ServerSpec:
    """The servers a world config describes."""
    return ServerSpec(
        curve=DecodeCurve(
            world.decode_step_s, world.decode_s_per_seq, world.decode_compute_s_per_seq
        ),
        prefill_s_per_token=1.0 / world.prefill_tokens_per_s,
        kv_capacity_tokens=float(world.kv_capacity_tokens),
        max_running=world.max_running,
        prefix_caching=world.prefix_caching,
        request_steps=world.request_steps,
    )


class SharedInference(Flights[Request]):
    """The episodes in inference, on `world.inference_servers` servers, keyed by episode id."""

    def __init__(self, queue: EventQueue, world: WorldConfig) -> None:
        self.queue = queue
        self.pause_on_update = world.pause_inference_on_update
        self.prompt_tokens = world.prompt_tokens
        spec = server_spec(world)
        self.servers = [Server(i, spec, queue) for i in range(world.inference_servers)]
        self.router = Router(world.inference_servers)
        self.flights = {}

    def start(self, now: float, episode_id: str, plan: EpisodePlan) -> None:
        """A dispatched episode goes to its group's server."""
        if episode_id in self.flights:
            raise ValueError(f"{episode_id} dispatched twice")
        target = plan.completion_tokens
        if plan.failed:  # it fails part way through its generation
            target = max(1, math.ceil(target * plan.fail_fraction))
        request = Request(  # positional: no keyword dict per episode
            episode_id,
            episode_id.rpartition("/")[0],
            plan,
            now,
            self.prompt_tokens if plan.prompt_tokens is None else plan.prompt_tokens,
            target,
            0.0 if plan.failed else plan.env_s,
        )
        self.flights[episode_id] = request
        self._submit(now, request)

    def spent_s(self, now: float, flight: Request) -> float:
        """Seconds since dispatch, until it was interrupted if it is."""
        return (now if flight.stopped is None else flight.stopped) - flight.started

    def _spent_interrupted(self, now: float, flight: Request, left_s: float) -> float:
        return self.spent_s(now, flight)

    def _unschedule(self, now: float, flight: Request) -> None:
        self._leave(now, flight)

    def arrive(
        self, now: float, episode_id: str
    ) -> tuple[Request, EpisodeCompleted | EpisodeFailed]:
        """The episode's outcome arrived: the request, and the world event to feed."""
        request = self.flights.pop(episode_id, None)
        if request is None:
            raise KeyError(f"{episode_id} came due but is not in inference")
        request.plan.work_s = now - request.started  # its seconds are an outcome of the world
        return request, outcome(now, episode_id, request.plan, request.prompt)

    def serve(self, now: float, server: int) -> str | None:
        """A server's happening came due: bring it to `now`, collect what finished decoding.
        The episode whose arrival falls at `now` (the happening is due at the first
        finish plus its environment seconds) arrives in this happening: its id, or None."""
        return self._sync(now, self.servers[server], deliver=True)

    def pause(self, now: float, duration_s: float) -> None:
        """A weight update: every server pauses for `duration_s`."""
        if not self.pause_on_update or duration_s <= 0.0:
            return
        for server in self.servers:
            server.pause(now, duration_s)
            self._collect(server)

    def slow(self, now: float, factor: float) -> None:
        """Every server's steps take `factor` times as long from now (a colocated trainer)."""
        for server in self.servers:
            server.slow(now, factor)
            self._collect(server)

    def busy_fraction(self, now: float) -> float:
        """The fraction of servers with requests on them at `now`."""
        return sum(1 for i in range(len(self.servers)) if self._load(now, i)) / len(self.servers)

    def interrupt(self, now: float, episode_id: str) -> int | None:
        """Stop an episode: its whole tokens so far, or None if it is not in flight (it
        arrived, was cancelled, or is interrupted). One in its environment is stopped too,
        as the contract has every episode in flight stopped: it goes on from all its
        tokens, paying their prefill and its environment again."""
        request = self.flights.get(episode_id)
        if request is None or request.cancelled is not None or request.left_s is not None:
            return None
        tokens = int(self._leave(now, request))
        request.done, request.phase, request.stopped = float(tokens), "interrupted", now
        request.left_s = float(request.target - tokens)
        return tokens

    def resume(self, now: float, episode_id: str, prefill_tokens: int) -> bool:
        """Resubmit an interrupted episode whose prompt now holds `prefill_tokens` (its
        prompt and tokens so far); False if it is no longer interrupted (cancelled)."""
        request = self.flights.get(episode_id)
        if request is None or request.left_s is None:
            return False
        if prefill_tokens != request.prompt + int(request.done):
            raise ValueError(
                f"{episode_id} resumes with {prefill_tokens} prompt tokens; it holds "
                f"{request.prompt} and {int(request.done)} generated"
            )
        request.left_s = request.stopped = None
        self._submit(now, request)
        return True

    def prompt_of(self, episode_id: str) -> int:
        """The prompt tokens of an episode in inference."""
        return self._flight(episode_id).prompt

    def forget_group(self, group_id: str) -> None:
        """A group was scored: its server affinity goes."""
        self.router.forget(group_id)

    def _submit(self, now: float, request: Request) -> None:
        index = self.router.place(request.group_id, partial(self._load, now))
        self.servers[index].submit(now, request)
        self._collect(self.servers[index])

    def _leave(self, now: float, request: Request) -> float:
        """Take a request out of inference wherever it is: its tokens so far."""
        if request.server >= 0:  # it may have finished decoding since its server last moved
            self._sync(now, self.servers[request.server])
        if request.entry is not None:  # decoded, in its environment: its arrival goes
            self.queue.cancel(request.entry)
            request.entry = None
            return request.done
        server = self.servers[request.server]
        tokens = server.remove(now, request)
        request.server = -1
        self._collect(server)
        return tokens

    def _load(self, now: float, index: int) -> int:
        """Requests on a server at `now` (what finished since it last moved is off it)."""
        server = self.servers[index]
        self._sync(now, server)
        return server.load

    def _sync(self, now: float, server: Server, *, deliver: bool = False) -> str | None:
        """Bring a server to `now`, schedule the arrivals of what finished, and its next
        happening (a server moves lazily: `runtime.sim.server`); see `_collect`."""
        server.advance(now)
        arrived = self._collect(server, deliver=deliver)
        server.reschedule(now, found_nothing=deliver and arrived is None)
        return arrived

    def _collect(self, server: Server, *, deliver: bool = False) -> str | None:
        """Schedule the arrivals of what finished decoding: after its environment seconds.
        With `deliver`, the first one due at the server's present is not scheduled but
        returned (its id), to arrive in the happening that found it."""
        finished = server.finished
        if not finished:
            return None
        arrived = None
        for t, request in finished:
            request.server = -1
            due = t + request.env_s
            if due < server.synced + ARRIVAL_EPSILON_S:  # never before the server's present
                if deliver and arrived is None:
                    arrived = request.episode_id
                    continue
                due = server.synced
            request.entry = self.queue.push(due, ("episode", request.episode_id))
        finished.clear()
        return arrived
