"""What a live run is given: where its facts go (`RunOutputs`) and how the driver runs
(`DriverOptions`); the deciders' knobs live in `RunConfig`."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Protocol

import attrs

from rolloutlog.events.types import Event
from rolloutlog.runtime.live.reports import StepStats
from rolloutlog.runtime.live.rollout_store import RolloutStore


def new_request_prefix() -> str:
    """`rl<8 hex>-`: several runs (and a resumed run's processes) may share a server."""
    return f"rl{secrets.token_hex(4)}-"


class LogAppender(Protocol):
    """Where appended events go: a `LogWriter` (append, then commit at settled points)."""

    def append(self, event: Event) -> Event: ...

    def commit(self) -> None: ...


@attrs.frozen(kw_only=True)
class RunOutputs:
    """Where a live run's facts go, each optional: the log, every reaction's events, each
    shipped step's stats (progress), and the rollouts a resume needs."""

    log: LogAppender | None = None
    on_events: Callable[[list[Event]], None] | None = None
    on_step: Callable[[StepStats], None] | None = None
    store: RolloutStore | None = None


@attrs.frozen(kw_only=True)
class DriverOptions:
    """How the driver runs; the deciders' knobs live in `RunConfig`."""

    steps: int
    seed: int = 0
    temperature: float = 1.0
    hard_task_share: float = 0.0
    publish_attempts: int = 3  # bounded retries of a weight update that failed everywhere
    publish_backoff_s: float = 0.5
    shutdown_timeout_s: float = 30.0
    check_invariants: bool = False
    endpoint_wait_s: float = 30.0  # no endpoint left: wait this long for one to come back
    eval_every: int = 0  # score the held-out tasks after every N-th step (0: never)
    eval_tasks: int = 64

    def __attrs_post_init__(self) -> None:
        if self.steps < 1 or self.publish_attempts < 1:
            raise ValueError("steps and publish_attempts must be >= 1")
