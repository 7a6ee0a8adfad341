"""Making a published version live on every endpoint, with bounded retries.

The trainer writes `v<k>/` to the broadcast directory, READY last; this module checks the
READY marker against the weights (a torn checkpoint is never loaded), then asks the pool
to pause, reload, relabel and resume every endpoint. A reload that failed everywhere
leaves inference on the old weights, so it is retried `attempts` times with doubling
backoff; after that the run cannot go on honestly, and `WeightUpdateFailed` says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from rolloutlog.runtime.live.broadcast import BroadcastError, WeightBroadcast
from rolloutlog.runtime.live.endpoints import EndpointPool, WeightReloadFailed
from rolloutlog.runtime.live.protocol import PauseMode

_log = logging.getLogger(__name__)


class LiveRunError(RuntimeError):
    """A fault that ends the run: the message says what failed and where."""


class WeightUpdateFailed(LiveRunError):
    """A new version could not be made live, after the bounded retries."""


class WeightPublisher:
    """Publishes broadcast versions to the pool; one update at a time (the driver's worker)."""

    def __init__(
        self,
        pool: EndpointPool,
        broadcast: WeightBroadcast,
        *,
        attempts: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.pool, self.broadcast = pool, broadcast
        self.attempts, self.backoff_s = attempts, backoff_s

    async def publish(
        self,
        weights_path: Path,
        version: int,
        *,
        live: int,
        pause: PauseMode = "keep",
        on_paused: Callable[[], None] | None = None,
    ) -> None:
        """Make `version` live everywhere; `live` is the version inference serves now.
        `pause` and `on_paused` as `EndpointPool.publish_weights` takes them."""
        try:
            path = self.broadcast.require_ready(version)
        except BroadcastError as error:  # never ask inference to load a torn checkpoint
            raise WeightUpdateFailed(f"v{version} is not ready to load: {error}") from error
        if path != weights_path:
            raise WeightUpdateFailed(f"v{version}: published at {weights_path}, READY at {path}")
        delay_s = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                await self.pool.publish_weights(
                    str(path), f"v{version}", pause=pause, on_paused=on_paused
                )
                return
            except WeightReloadFailed as error:
                failure = error
                _log.warning("update to v%d failed (attempt %d): %s", version, attempt, error)
            if attempt < self.attempts:
                await asyncio.sleep(delay_s)
                delay_s *= 2
        raise WeightUpdateFailed(
            f"weight update to v{version} failed {self.attempts} times; "
            f"inference still serves v{live}: {failure}"
        )

    async def leave_running(self, timeout_s: float) -> None:
        """Resume every endpoint (best effort): an update cut short by a shutdown may have
        left them paused, and a long-lived `vllm serve` must stay usable by the next run."""
        resumes = [endpoint.backend.resume() for endpoint in self.pool.alive()]
        try:
            await asyncio.wait_for(asyncio.gather(*resumes, return_exceptions=True), timeout_s)
        except TimeoutError:
            _log.warning("inference servers did not confirm resume at shutdown")
