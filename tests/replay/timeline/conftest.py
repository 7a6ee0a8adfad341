"""Logs the timeline tests draw: the docs' hand-fed run, and a short chaos simulation."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)


def worked_example() -> list[Event]:
    """The run of docs/replay.md (G=2, 3 permits, batches of 2, bound 1)."""
    config = RunConfig(group_size=2, max_inflight=3, batch_size=2, max_off_policy_steps=1)
    loop = ReactionLoop(config)
    log = loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )

    def done(t: float, episode: str, reward: float) -> list[Event]:
        return loop.feed(
            EpisodeCompleted(
                t=t, episode_id=episode, reward=reward, prompt_tokens=10, completion_tokens=20
            )
        )

    log += done(1.0, "g1/0", 1.0) + done(2.0, "g1/1", 0.0)
    log += loop.feed(EpisodeFailed(t=2.5, episode_id="g2/0", error="timeout"))
    log += loop.feed(VersionPending(t=3.0, version=1)) + loop.feed(VersionLive(t=3.5, version=1))
    log += done(4.0, "g2/1", 1.0) + done(5.0, "g3/0", 0.5)
    return log + loop.feed(RunFinished(t=6.0, reason="steps"))


@pytest.fixture(scope="session")
def worked_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("worked") / "run.arrow"
    write_log(path, worked_example())
    return path


@pytest.fixture(scope="session")
def chaos_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six steps of the chaos scenario: overload and shutdown cancellations, drops, failures,
    late arrivals."""
    path = tmp_path_factory.mktemp("chaos") / "chaos.arrow"
    arguments = ["simulate", "--scenario", "chaos", "--steps", "6", "--log", str(path)]
    result = CliRunner().invoke(main, arguments)
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return path
