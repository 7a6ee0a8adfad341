"""The rollout store: what the trainer needs and the log does not hold, kept durable.

The log records that an episode completed and its reward; the trainer also needs its
prompt, completion tokens and inference logprobs. A live run keeps those in memory only
until the episode's fate is final, so a crash would lose every admitted episode not yet
trained. The store appends each kept rollout as one JSON line to `<log>.rollouts` and is
made durable (`sync`) right before each log commit, so every completion the durable log
holds has its rollout on disk. Resuming reads it back (the last line of an episode wins; a
torn last line is cut). Metadata lines (`{"meta": {...}}`) record how the run was started
(settings, seed, steps, weights directory, endpoints, the run id its checkpoints carry)
and each process's request prefix.

Floats are written with the shortest repr that round-trips, so a resumed run trains on
exactly the logprobs inference reported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from rolloutlog.runtime.live.episodes import Rollout

SUFFIX: Final = ".rollouts"


class StoreError(RuntimeError):
    """The rollout store is missing, unreadable, or lacks a rollout the log needs."""


def store_path(log_path: Path) -> Path:
    """Where the rollouts of the log at `log_path` are kept."""
    return log_path.with_name(log_path.name + SUFFIX)


class RolloutStore:
    """Appends rollouts and metadata; `sync` writes and fsyncs what was appended."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        if append:
            _cut_torn_line(path)
        elif path.exists():
            raise StoreError(f"{path}: exists; a new run needs a new rollout store")
        self._file = path.open("a", encoding="utf-8")
        self._lines: list[str] = []

    def note(self, **meta: Any) -> None:
        """Record run metadata (JSON data); later notes override earlier keys."""
        self._lines.append(json.dumps({"meta": meta}, separators=(",", ":")) + "\n")

    def keep(self, episode_id: str, rollout: Rollout) -> None:
        record: dict[str, Any] = {
            "e": episode_id,
            "p": rollout.prompt_ids,
            "c": rollout.completion_ids,
            "l": rollout.logprobs,
            "r": rollout.reward,
            "v": rollout.version,
        }
        if rollout.token_versions is not None:  # interrupt mode: the version of each token
            record["t"] = rollout.token_versions
        self._lines.append(json.dumps(record, separators=(",", ":")) + "\n")

    def sync(self) -> None:
        """Make everything appended durable; the driver calls it before each log commit."""
        if self._lines:
            self._file.write("".join(self._lines))
            self._lines.clear()
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self.sync()
        self._file.close()


@attrs.frozen
class StoredRun:
    """A store read back: merged metadata and the raw line of each episode's rollout."""

    meta: Mapping[str, Any]
    lines: Mapping[str, str]

    def rollout(self, episode_id: str) -> Rollout | None:
        line = self.lines.get(episode_id)
        if line is None:
            return None
        record = json.loads(line)
        return Rollout(
            prompt_ids=tuple(record["p"]),
            completion_ids=tuple(record["c"]),
            logprobs=tuple(record["l"]),
            reward=record["r"],
            version=record["v"],
            token_versions=None if "t" not in record else tuple(record["t"]),
        )


def read_store(path: Path) -> StoredRun:
    """Read a store; a torn last line (the writer died mid-write) is ignored."""
    if not path.is_file():
        raise StoreError(f"{path}: no rollout store (was the run started by rolloutlog train?)")
    meta: dict[str, Any] = {}
    lines: dict[str, str] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith("\n"):
                break
            if line.startswith('{"e":'):
                lines[line[6 : line.index('"', 6)]] = line
                continue
            try:
                meta.update(json.loads(line)["meta"])
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise StoreError(f"{path}:{number}: unreadable line ({error})") from error
    return StoredRun(meta, lines)


def _cut_torn_line(path: Path) -> None:
    """Truncate a torn last line, so that appended lines start on a line of their own."""
    if not path.is_file():
        raise StoreError(f"{path}: no rollout store to continue")
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.truncate(path, data.rfind(b"\n") + 1)
