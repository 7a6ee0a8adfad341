"""Small hand-fed logs shared by the replay tests."""

from __future__ import annotations

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import EpisodeCompleted, Event, RunFinished, RunStarted


def small_log(**config: object) -> list[Event]:
    """A hand-fed run (G=2, 2 permits, batches of 2): three completions, then shutdown."""
    return small_run(
        RunConfig.from_mapping({"group_size": 2, "max_inflight": 2, "batch_size": 2, **config})
    )


def small_run(run: RunConfig) -> list[Event]:
    """`small_log`'s world events under any config, even one `simulate` would refuse."""
    loop = ReactionLoop(run)
    log = loop.feed(
        RunStarted(
            t=0.0, config=run.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    for t, episode_id in ((1.0, "g1/0"), (2.0, "g1/1"), (3.0, "g2/0")):
        log += loop.feed(
            EpisodeCompleted(
                t=t, episode_id=episode_id, reward=t, prompt_tokens=1, completion_tokens=1
            )
        )
    return log + loop.feed(RunFinished(t=4.0, reason="done"))


def unfinished_log() -> list[Event]:
    """`small_log` before its run_finished: every world event in it has settled."""
    log = small_log()
    return log[: next(i for i, e in enumerate(log) if e.kind == "run_finished")]
