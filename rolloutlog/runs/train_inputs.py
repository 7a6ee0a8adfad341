"""What `train` checks before a run starts, and the crashed run a resume reads back.

Nothing here imports torch (it takes seconds), so bad input is refused at once: a new
run's files are checked before any is created, and a crashed run is read (never written)
from its log and its rollout store. A refusal is `RunRefused`, whose message names the
option and the problem (the command prints it as its one line).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import attrs

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.events.errors import LogError
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import RunStarted
from rolloutlog.runtime.live.rollout_store import StoredRun, StoreError, read_store, store_path
from rolloutlog.runtime.live.settings import LiveSettings

WEIGHTS_SUFFIX: Final = ".weights"


class RunRefused(Exception):
    """Bad input for a run, found before anything was written: `--option value: why`."""


def weights_beside(log_path: Path) -> Path:
    """`LOG.weights/`: where a run keeps its checkpoints unless `--weights-dir` says
    otherwise, so that every run can be resumed (`--resume` restarts from them)."""
    return log_path.with_name(log_path.name + WEIGHTS_SUFFIX)


def check_urls(urls: tuple[str, ...]) -> None:
    """Refuse a `--url` that is not `http(s)://HOST[:PORT]` before anything starts (an
    out-of-range port raised deep in the client, a bare word was retried)."""
    for url in urls:
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 (raises on a port out of range)
        except ValueError as error:
            raise RunRefused(f"--url {url}: {error}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RunRefused(f"--url {url}: expected http://HOST[:PORT] or https://HOST[:PORT]")


def check_folder(path: Path, option: str) -> None:
    """Refuse a path whose folder cannot hold it: missing (as every command refuses it), a
    file on its way, no write permission; before the command creates anything."""
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise RunRefused(f"{option} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunRefused(f"{option} {path}: {existing} is not writable")
    if not path.absolute().parent.is_dir():
        raise RunRefused(f"{option} {path}: the folder {path.parent} does not exist")


def check_new_run(log_path: Path, weights_dir: Path | None, *, default_log: bool) -> None:
    """Everything a new run creates, checked before it creates any of it (the default
    log's folder, `runs/`, is made; a given `--log`'s must exist). Checkpoints already in
    `weights_dir` are checked by `runs.train.check_weights_dir`, which needs torch."""
    if log_path.exists():
        raise RunRefused(f"--log {log_path}: exists; name a new file")
    store = store_path(log_path)
    if store.exists():
        raise RunRefused(
            f"--log {log_path}: {store} exists (another run's rollout store?); name a new log"
        )
    check_folder(log_path.parent if default_log else log_path, "--log")
    if weights_dir is None:  # the checkpoints go beside the log
        beside = weights_beside(log_path)
        if beside.exists():
            raise RunRefused(
                f"--log {log_path}: {beside} exists (another run's checkpoints?); name a new log"
            )
        return
    check_folder(weights_dir, "--weights-dir")


@attrs.frozen(kw_only=True)
class CrashedRun:
    """What `--resume` takes from the run itself: its `run_started` and its store's notes."""

    config: RunConfig
    settings: LiveSettings
    stored: StoredRun
    seed: int
    steps: int
    weights_dir: Path | None
    urls: tuple[str, ...]


def read_crashed_run(log_path: Path) -> CrashedRun:
    """The run to resume, read (never written) from its log and its rollout store."""
    if not log_path.is_file():
        raise RunRefused(f"--resume {log_path}: no such log")
    store = store_path(log_path)
    try:  # a process killed as it created the log leaves it empty
        first = (
            next(iter(LogReader(log_path, warn=False)), None) if log_path.stat().st_size else None
        )
    except (OSError, LogError) as error:
        raise RunRefused(f"--resume {log_path}: {error}") from error
    if not isinstance(first, RunStarted):
        raise RunRefused(
            f"--resume {log_path}: the run never started (its process died before it "
            f"recorded run_started), so there is nothing to resume; start it anew (remove "
            f"{log_path} and {store}, or name a new --log)"
        )
    try:
        stored = read_store(store)
    except (OSError, StoreError) as error:
        raise RunRefused(f"--resume {log_path}: {error}") from error
    meta = stored.meta
    try:
        return CrashedRun(
            config=RunConfig.from_mapping(first.config, where="run_started.config"),
            settings=LiveSettings(**meta["settings"]),
            stored=stored,
            seed=int(meta["seed"]),
            steps=int(meta["steps"]),
            weights_dir=None if meta.get("weights_dir") is None else Path(meta["weights_dir"]),
            urls=tuple(meta.get("urls", ())),
        )
    except (ConfigError, KeyError, TypeError, ValueError) as error:
        raise RunRefused(
            f"--resume {log_path}: {store}: the run's notes are unusable ({error!r})"
        ) from error
