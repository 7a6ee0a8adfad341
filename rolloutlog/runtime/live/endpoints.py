"""Several inference endpoints used as one, as users run several vLLM replicas.

- Placement: the members of a group stay on one endpoint, so they share its prefix cache
  (their prompts are identical); a new group goes to the endpoint with the fewest
  requests in flight (ties: the first listed, so placement is reproducible).
- Weight updates fan out: pause (keep) everywhere, reload everywhere, relabel everywhere,
  resume everywhere; `publish_weights` returns, and the version is live, only when every
  endpoint still in rotation has it.
- Loss: an endpoint that stops answering, or whose engine died (a transport failure or
  a 5xx answer, confirmed by a failed health probe: a vLLM engine that died answers 500,
  then its server exits), is taken out of rotation with a warning. Its in-flight requests fail at
  once with `EndpointLost`, so the caller records each as a failed episode: none is lost
  from the accounting, and none waits on a dead socket. An endpoint whose weight reload
  fails is taken out the same way: it would serve the wrong version.
- Recovery: once the run is under way (`wait_for_endpoints(seconds)`), losing the last
  endpoint is not the end at once: new requests and weight updates wait while the lost
  endpoints are health-checked, and the first to answer is given the live weights and
  taken back into rotation (a restarted `vllm serve` starts from whatever checkpoint it
  was given). Only when none comes back in time is `NoEndpointsLeft` raised.
Everything runs on one asyncio loop, so the bookkeeping needs no locks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar

import attrs

from rolloutlog.runtime.affinity import GroupAffinity
from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    Generation,
    InferenceBackend,
    InferenceError,
    InferenceRejected,
    InferenceUnavailable,
    PauseMode,
)

RECOVERY_POLL_S: Final = 0.5  # how often lost endpoints are health-checked while none is left
_log = logging.getLogger(__name__)
T = TypeVar("T")


class EndpointLost(InferenceError):
    """The request's endpoint was taken out of rotation while the request was in flight."""


class NoEndpointsLeft(InferenceError):
    """Every endpoint has been taken out of rotation."""


class WeightReloadFailed(InferenceError):
    """No endpoint could load the new weights; inference resumed on the old ones."""


@attrs.define(eq=False)
class Endpoint:
    """One backend and its bookkeeping."""

    index: int
    backend: InferenceBackend
    inflight: dict[str, asyncio.Task[Generation]] = attrs.Factory(dict)
    alive: bool = True
    lost_reason: str | None = None
    version: str | None = None
    generations: int = 0  # generate calls it answered (any finish reason)

    @property
    def url(self) -> str:
        return self.backend.url


LostCallback = Callable[[str, str, list[str]], None]


class EndpointPool:
    """Group-affine, least-loaded placement over several backends, with fan-out updates."""

    def __init__(
        self, backends: Sequence[InferenceBackend], *, on_lost: LostCallback | None = None
    ) -> None:
        if not backends:
            raise ValueError("an endpoint pool needs at least one backend")
        self.endpoints = [Endpoint(i, b) for i, b in enumerate(backends)]
        self._affinity: GroupAffinity[Endpoint] = GroupAffinity()
        self._where: dict[str, Endpoint] = {}
        self._on_lost = on_lost
        self.live_version: str | None = None
        self.live_weights: str | None = None  # what a recovered endpoint is given
        self._wait_s = 0.0
        self._recovery: asyncio.Task[bool] | None = None
        self._gave_up = False

    def wait_for_endpoints(self, seconds: float) -> None:
        """From now on, wait up to `seconds` for a lost endpoint to come back when none
        is left (the driver sets it once the run has recorded its start)."""
        self._wait_s = seconds

    # ---- placement and generation ----------------------------------------------------
    def alive(self) -> list[Endpoint]:
        return [e for e in self.endpoints if e.alive]

    def place(self, group_id: str) -> Endpoint:
        """The group's endpoint; a new (or orphaned) group goes to the least loaded."""
        endpoint = self._affinity.recall(group_id, lambda e: e.alive)
        if endpoint is not None:
            return endpoint
        candidates = self.alive()
        if not candidates:
            raise self._none_left()
        least = min(candidates, key=lambda e: (len(e.inflight), e.index))
        return self._affinity.remember(group_id, least)

    def forget_group(self, group_id: str) -> None:
        """Drop a finished group's affinity."""
        self._affinity.forget(group_id)

    async def generate(self, group_id: str, request: GenerateRequest) -> Generation:
        """Generate on the group's endpoint; `EndpointLost` if that endpoint is lost."""
        await self._alive_or_recovered()
        endpoint = self.place(group_id)
        if request.request_id in self._where:
            raise ValueError(f"request_id {request.request_id!r} is already in flight")
        task = asyncio.ensure_future(endpoint.backend.generate(request))
        endpoint.inflight[request.request_id] = task
        self._where[request.request_id] = endpoint
        try:
            generation = await asyncio.shield(task)
            endpoint.generations += 1
            return generation
        except asyncio.CancelledError:
            if task.cancelled() and not endpoint.alive:
                raise EndpointLost(
                    f"{request.request_id}: endpoint {endpoint.url} was taken out of rotation "
                    f"({endpoint.lost_reason})"
                ) from None
            task.cancel()
            raise
        except InferenceUnavailable as error:
            await self._probe(endpoint, str(error))
            raise
        except InferenceRejected as error:
            if error.status >= 500:
                await self._probe(endpoint, str(error))
            raise
        finally:
            endpoint.inflight.pop(request.request_id, None)
            self._where.pop(request.request_id, None)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort requests wherever they run; ids not in flight are ignored."""
        by_endpoint: dict[int, list[str]] = {}
        for request_id in request_ids:
            endpoint = self._where.get(request_id)
            if endpoint is not None and endpoint.alive:
                by_endpoint.setdefault(endpoint.index, []).append(request_id)
        await self._each(
            [self.endpoints[i] for i in by_endpoint],
            lambda e: e.backend.abort(by_endpoint[e.index]),
        )

    # ---- weights ---------------------------------------------------------------------
    async def publish_weights(
        self,
        weights_path: str,
        version: str,
        *,
        pause: PauseMode = "keep",
        on_paused: Callable[[], None] | None = None,
    ) -> str:
        """Make `version` (a checkpoint directory) live on every endpoint in rotation.

        Pause in keep mode, so requests in flight freeze and finish on the new weights
        (their `weight_versions` show both), or in abort mode (`pause="abort"`, interrupt
        mode), so they answer at once with their tokens so far (`partial`); then reload,
        relabel and resume. `on_paused` is called once every endpoint is paused (what
        was sent before then is all a pause can interrupt). An endpoint
        whose reload fails leaves rotation; if all fail, all resume on the old weights and
        `WeightReloadFailed` is raised. With no endpoint left it waits for one to come
        back (`wait_for_endpoints`), then updates it.
        """
        while True:
            await self._alive_or_recovered()
            try:
                return await self._publish_once(weights_path, version, pause, on_paused)
            except NoEndpointsLeft:
                if not self._may_recover():
                    raise

    async def _publish_once(
        self,
        weights_path: str,
        version: str,
        pause: PauseMode,
        on_paused: Callable[[], None] | None,
    ) -> str:
        await self._each(self.alive(), lambda e: e.backend.pause(pause))
        self._require_alive()  # every endpoint failed to pause: lost, not a reload failure
        if on_paused is not None:
            on_paused()
        failures = await self._each(
            self.alive(), lambda e: e.backend.reload_weights(weights_path), lose=False
        )
        loaded = [e for e in self.alive() if e.index not in failures]
        if not loaded:
            await self._each(self.alive(), lambda e: e.backend.resume())
            reasons = "; ".join(str(error) for error in failures.values())
            raise WeightReloadFailed(f"no endpoint could load {weights_path}: {reasons}")
        for index, error in failures.items():
            self._lose(self.endpoints[index], f"weight reload failed: {error}")
        await self._each(loaded, lambda e: e.backend.update_weight_version(version))
        await self._each(self.alive(), lambda e: e.backend.resume())
        for endpoint in self.alive():
            endpoint.version = version
        self._require_alive()
        self.live_version, self.live_weights = version, weights_path
        return version

    async def check_health(self) -> list[str]:
        """Probe every endpoint in rotation; returns the urls of those taken out."""
        lost = []
        for endpoint, healthy in zip(
            self.alive(),
            await asyncio.gather(*(e.backend.health() for e in self.alive())),
            strict=True,
        ):
            if not healthy:
                self._lose(endpoint, "health check failed")
                lost.append(endpoint.url)
        return lost

    async def aclose(self) -> None:
        await asyncio.gather(*(e.backend.aclose() for e in self.endpoints))

    # ---- recovery --------------------------------------------------------------------
    def _may_recover(self) -> bool:
        return self._wait_s > 0 and not self._gave_up

    async def _alive_or_recovered(self) -> None:
        """Return once an endpoint is in rotation; `NoEndpointsLeft` if none comes back."""
        if self.alive():
            return
        if not self._may_recover():
            raise self._none_left()
        if self._recovery is None:  # one recovery at a time; every caller waits on it
            self._recovery = asyncio.ensure_future(self._recover())
        if not await asyncio.shield(self._recovery):
            raise self._none_left()

    async def _recover(self) -> bool:
        """Health-check the lost endpoints until one is back in rotation or time is up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_s
        _log.warning(
            "no inference endpoint is left; waiting up to %.1f s for one to come back",
            self._wait_s,
        )
        try:
            while True:
                for endpoint in self.endpoints:
                    if await endpoint.backend.health() and await self._readmit(endpoint):
                        return True
                left = deadline - loop.time()
                if left <= 0:
                    self._gave_up = True
                    return False
                await asyncio.sleep(min(RECOVERY_POLL_S, left))
        finally:
            self._recovery = None

    async def _readmit(self, endpoint: Endpoint) -> bool:
        """Give a lost endpoint that answers again the live weights, then take it back."""
        try:
            if self.live_weights is not None and self.live_version is not None:
                await endpoint.backend.reload_weights(self.live_weights)
                await endpoint.backend.update_weight_version(self.live_version)
            await endpoint.backend.resume()
        except InferenceError as error:
            _log.warning("inference endpoint %s answers but cannot rejoin: %s", endpoint.url, error)
            return False
        endpoint.alive, endpoint.lost_reason = True, None
        endpoint.version = self.live_version
        _log.warning(
            "inference endpoint %s is back in rotation, serving %s", endpoint.url, self.live_version
        )
        return True

    # ---- loss ------------------------------------------------------------------------
    async def _each(
        self,
        endpoints: list[Endpoint],
        call: Callable[[Endpoint], Awaitable[T]],
        *,
        lose: bool = True,
    ) -> dict[int, InferenceError]:
        """Run `call` on every endpoint at once; an endpoint that fails leaves rotation
        (when `lose`), and the failures are returned by endpoint index."""
        outcomes = await asyncio.gather(*(call(e) for e in endpoints), return_exceptions=True)
        failures: dict[int, InferenceError] = {}
        for endpoint, outcome in zip(endpoints, outcomes, strict=True):
            if isinstance(outcome, InferenceError):
                failures[endpoint.index] = outcome
                if lose:
                    self._lose(endpoint, str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
        return failures

    async def _probe(self, endpoint: Endpoint, reason: str) -> None:
        """After a transport failure: lose the endpoint only if it fails a health probe."""
        if endpoint.alive and not await endpoint.backend.health():
            self._lose(endpoint, reason)

    def _lose(self, endpoint: Endpoint, reason: str) -> None:
        if not endpoint.alive:
            return
        endpoint.alive = False
        endpoint.lost_reason = reason
        failed = sorted(endpoint.inflight)
        _log.warning(
            "inference endpoint %s taken out of rotation (%s); %d request(s) in flight "
            "recorded as failed; %d endpoint(s) left",
            endpoint.url,
            reason,
            len(failed),
            len(self.alive()),
        )
        for task in endpoint.inflight.values():
            task.cancel()
        if self._on_lost is not None:
            self._on_lost(endpoint.url, reason, failed)

    def _require_alive(self) -> None:
        if not self.alive():
            raise self._none_left()

    def _none_left(self) -> NoEndpointsLeft:
        """Every endpoint is out of rotation: the error names each and why it left."""
        reasons = "; ".join(f"{e.url}: {e.lost_reason}" for e in self.endpoints)
        return NoEndpointsLeft(f"no inference endpoint is left in rotation ({reasons})")
