"""Whether a log replays clean: both folds apply every event and report no violation."""

from __future__ import annotations

from pathlib import Path

from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log


def replay_problems(path: Path) -> list[str]:
    """What `rolloutlog replay` would object to, by either fold; empty when clean."""
    problems = []
    for columnar in (True, False):
        replay = replay_log(open_log(path), columnar=columnar)
        if replay.error is not None:
            problems.append(f"stopped: {replay.error}")
        problems += replay.violations
    return problems
