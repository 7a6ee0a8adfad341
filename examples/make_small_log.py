"""Write examples/small.arrow and examples/small.jsonl: a tiny, valid run, made by hand.

Two train groups of four episodes at version 0, all completed and scored, one batch of
eight shipped (group g2 has only zero advantages, so its members are pruned from training),
then version 1 published and the run finished. The events follow the ordering rules of
docs/contract.md closely enough to read; once the simulator exists it regenerates this example.

    .venv/bin/python examples/make_small_log.py
"""

from __future__ import annotations

from pathlib import Path

from rolloutlog import __version__
from rolloutlog.core.config import RunConfig
from rolloutlog.events.jsonl import write_jsonl
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    Event,
    GroupOpened,
    GroupScored,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)

HERE = Path(__file__).resolve().parent
CONFIG = RunConfig(group_size=4, batch_size=8, max_inflight=8)
REWARDS = {"g1": (1.0, 0.0, 1.0, 1.0), "g2": (0.5, 0.5, 0.5, 0.5)}


def group_events(group_id: str, task_id: str, t: float) -> list[Event]:
    """Open a group and dispatch its members at version 0, for step 1."""
    size = CONFIG.group_size
    opened = GroupOpened(
        t=t,
        group_id=group_id,
        work="train",
        env="arithmetic",
        task_id=task_id,
        group_size=size,
        policy_version=0,
        step=1,
        frozen=False,
    )
    dispatched = [
        EpisodeDispatched(
            t=t, episode_id=f"{group_id}/{m}", group_id=group_id, member=m, policy_version=0
        )
        for m in range(size)
    ]
    return [opened, *dispatched]


def scored_events(group_id: str, t: float) -> list[Event]:
    """Every member completes; the group scores with GRPO advantages (reward - mean)."""
    rewards = REWARDS[group_id]
    completed = [
        EpisodeCompleted(
            t=t + 0.25 * m,
            episode_id=f"{group_id}/{m}",
            reward=reward,
            prompt_tokens=32,
            completion_tokens=96 + 8 * m,
        )
        for m, reward in enumerate(rewards)
    ]
    mean = sum(rewards) / len(rewards)
    scored = GroupScored(
        t=completed[-1].t,
        group_id=group_id,
        episode_ids=tuple(event.episode_id for event in completed),
        advantages=tuple(reward - mean for reward in rewards),
        admitted=True,
    )
    return [*completed, scored]


def small_run() -> list[Event]:
    started = RunStarted(
        t=0.0,
        config=CONFIG.to_dict(),
        seed=CONFIG.seed,
        schema_version=SCHEMA_VERSION,
        code_version=f"rolloutlog {__version__} (examples/make_small_log.py)",
    )
    g1, g2 = ["g1/0", "g1/1", "g1/2", "g1/3"], ["g2/0", "g2/1", "g2/2", "g2/3"]
    shipped = BatchShipped(
        t=4.0, step=1, episode_ids=(*g1, *g2), trained_ids=tuple(g1), tokens=4 * 32 + 4 * 108
    )
    return [
        started,
        *group_events("g1", "task-17", 0.0),
        *group_events("g2", "task-4", 0.0),
        *scored_events("g1", 2.0),
        *scored_events("g2", 3.0),
        shipped,
        VersionPending(t=9.0, version=1),
        VersionLive(t=9.5, version=1),
        RunFinished(t=9.5, reason="steps"),
    ]


def main() -> None:
    log = HERE / "small.arrow"
    write_log(log, small_run(), overwrite=True)
    with (HERE / "small.jsonl").open("w", encoding="utf-8") as out:
        write_jsonl(read_log(log), out)
    print(f"wrote {log} and {log.with_suffix('.jsonl')}")


if __name__ == "__main__":
    main()
