"""What a live run reports: one line per shipped batch, and how the run ended."""

from __future__ import annotations

from typing import Any

import attrs

from rolloutlog.runtime.live.endpoints import Endpoint


@attrs.frozen(kw_only=True)
class StepStats:
    """One shipped batch, for the progress display; counts are totals so far."""

    step: int
    mean_reward: float | None
    trained: int
    ages: dict[int, int]
    version_live: int
    wall_s: float
    cancelled_stale: int
    dropped_stale: int
    failed: int
    late: int


@attrs.frozen(kw_only=True)
class LiveResult:
    """How the run ended. `error` names the fault when it did not end as asked."""

    finished_reason: str
    error: str | None
    steps_shipped: int
    reward_curve: tuple[float | None, ...]
    wall_seconds: float
    events: int
    version_live: int
    versions_trained: int
    counts: dict[str, int]
    endpoints: tuple[dict[str, Any], ...]  # url, alive, lost_reason, generations
    # per trained step: the trainer's figures, the trained ages and any held-out eval
    train_steps: tuple[dict[str, Any], ...] = ()


def endpoint_report(endpoint: Endpoint) -> dict[str, Any]:
    """One endpoint as the report shows it."""
    return {
        "url": endpoint.url,
        "alive": endpoint.alive,
        "lost_reason": endpoint.lost_reason,
        "generations": endpoint.generations,
    }
