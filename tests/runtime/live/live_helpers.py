"""Running the live driver in tests: small runs against servers the test controls.

A uniquely named module (not conftest) so that test files import it without ambiguity.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_writer import BATCH_EVENTS_MAX, LogWriter
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.live.broadcast import WeightBroadcast
from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.driver import DriverOptions, LiveDriver, RunOutputs
from rolloutlog.runtime.live.endpoints import EndpointPool
from rolloutlog.runtime.live.reports import LiveResult, StepStats
from rolloutlog.runtime.live.session import initial_model
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.trainer import GRPOTrainer, TrainerConfig

# Small and quick: groups of 4, batches of 16, 16 episodes in flight.
SMALL = {"group_size": 4, "batch_size": 16, "max_inflight": 16}


def run_driver(
    tmp_path: Path,
    urls: Sequence[str],
    *,
    steps: int,
    overrides: dict[str, Any] | None = None,
    limits: ClientLimits | None = None,
    on_step: Callable[[StepStats], None] | None = None,
    publish_attempts: int = 3,
    prepare: Callable[[GRPOTrainer], None] | None = None,
    endpoint_wait_s: float = 0.0,
    connect: Callable[..., VLLMClient] = VLLMClient,
) -> tuple[LiveResult, Path]:
    """Drive a run with every invariant checked on every event; (result, log path).
    `connect(url, limits=...)` makes each endpoint's client."""
    config, settings = build_settings({**SMALL, **(overrides or {})}, seed=0)
    trainer = GRPOTrainer(
        initial_model(settings, seed=0),
        WeightBroadcast(tmp_path / "weights"),
        TrainerConfig(learning_rate=settings.learning_rate),
    )
    if prepare is not None:
        prepare(trainer)
    options = DriverOptions(
        steps=steps,
        check_invariants=True,
        publish_attempts=publish_attempts,
        publish_backoff_s=0.05,
        shutdown_timeout_s=10.0,
        endpoint_wait_s=endpoint_wait_s,
    )
    log_path = tmp_path / "run.arrow"

    async def drive(log: LogWriter) -> LiveResult:
        clients = [connect(url, limits=limits or ClientLimits(backoff_s=0.05)) for url in urls]
        pool = EndpointPool(clients)
        outputs = RunOutputs(log=log, on_step=on_step)
        driver = LiveDriver(config, pool=pool, trainer=trainer, options=options, outputs=outputs)
        try:
            return await driver.run()
        finally:
            await pool.aclose()

    with LogWriter(log_path, batch_events=BATCH_EVENTS_MAX, fsync=False) as log:
        result = asyncio.run(drive(log))
    return result, log_path


def verified_summary(log_path: Path) -> dict[str, Any]:
    """Verify the log (today's deciders re-decide it exactly) and return its replay summary."""
    verdict = verify_log(open_log(log_path))
    assert verdict.ok, (verdict.divergence and verdict.divergence.describe(), verdict.error)
    replay = replay_log(open_log(log_path))
    assert replay.error is None, replay.error
    assert replay.violations == [], replay.violations[:5]
    return replay.summary


def failures(log_path: Path) -> list[str]:
    """The `error` of every `episode_failed` in the log."""
    return [e.error for e in open_log(log_path).events() if e.kind == "episode_failed"]  # type: ignore[union-attr]


class OnWarning(logging.Handler):
    """Calls `act` once, when a warning containing `text` is logged: a test waits on the
    runtime's own report of an event instead of on time."""

    def __init__(self, text: str, act: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.text, self.act, self.done = text, act, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.done and self.text in record.getMessage():
            self.done = True
            self.act()


@contextlib.contextmanager
def on_warning(text: str, act: Callable[[], None]) -> Iterator[OnWarning]:
    """`OnWarning` on rolloutlog's loggers for the block."""
    handler = OnWarning(text, act)
    logger = logging.getLogger("rolloutlog")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def train_checked(log: Path, arguments: Sequence[str], settings: Sequence[str]) -> dict[str, Any]:
    """`rolloutlog train ARGUMENTS --json --log LOG` in thread servers with each of `settings`
    set and the invariants checked on every event: its report, once the run finished on its
    steps with nothing broken and `verify` re-decided every decision of the log."""
    command = ["train", *arguments, "--json", "--log", str(log)]
    for setting in ("server_mode=thread", "check_invariants=true", *settings):
        command += ["--set", setting]
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["finished_reason"] == "steps" and report["invariant_violations"] == []
    assert report["replay_error"] is None
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output
    return report


def train_preset_at_bound_zero(log: Path, policy: str) -> dict[str, Any]:
    """`train --policy POLICY` for 4 small steps at bound 0 (`train_checked`): nothing
    trains past age 0."""
    small = ("group_size=4", "batch_size=16", "max_inflight=16")
    bound = ("max_off_policy_steps=0", "target_lag=0")
    report = train_checked(log, ["--policy", policy, "--steps", "4"], (*small, *bound))
    assert report["max_trained_age"] == 0
    return report
