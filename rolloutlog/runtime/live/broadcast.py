"""The weight broadcast directory: one Hugging Face checkpoint per policy version.

Layout: `<root>/v<k>/config.json`, `<root>/v<k>/model.safetensors`, and `<root>/v<k>/READY`,
written last. A reader (the runtime, before it asks inference to reload) trusts a version
only once READY exists, so a crash mid-write never reaches inference. READY holds the
version and the SHA-256 of the weights file, which `require_ready` re-checks: what
inference loads is what the trainer wrote, and that the checkpoint is complete and readable
by a server running as another user (files 0644, directories 0755): a vLLM engine asked to
load weights it cannot read fails, and may die. Only the newest `keep` versions stay on
disk. READY also names the run that wrote it (`run`, when the broadcast has a `run_id`), so
a resume can tell its own checkpoints from another run's with fitting version numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Final

from rolloutlog.runtime.live.model import (
    CHECKPOINT_FILE_MODE,
    WEIGHTS_FILE,
    CheckpointError,
    LlamaForCausalLM,
    check_checkpoint,
    save_checkpoint,
)

READY_FILE: Final = "READY"
DIRECTORY_MODE: Final = 0o755


def new_run_id() -> str:
    """A run's identity, chosen when it starts; its checkpoints carry it."""
    return secrets.token_hex(8)


class BroadcastError(RuntimeError):
    """A version directory is missing, incomplete, or does not match its READY marker."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class WeightBroadcast:
    """Publishes checkpoints by version under `root`, keeping the newest `keep`; each READY
    names `run_id` (when given)."""

    def __init__(self, root: Path, keep: int = 3, run_id: str | None = None) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.root = root  # created by the first `publish`: reading one never creates it
        self.keep = keep
        self.run_id = run_id

    def path(self, version: int) -> Path:
        return self.root / f"v{version}"

    def versions(self) -> list[int]:
        """The versions with a folder under the root (complete or not), oldest first."""
        return sorted(int(d.name[1:]) for d in self.root.glob("v*") if d.name[1:].isdigit())

    def publish(self, model: LlamaForCausalLM, version: int) -> Path:
        """Write version `version` (replacing a partial earlier attempt), READY last."""
        if version < 0:
            raise ValueError(f"version must be >= 0, got {version}")
        directory = self.path(version)
        if directory.exists():
            shutil.rmtree(directory)
        save_checkpoint(model, directory)
        directory.chmod(DIRECTORY_MODE)
        for name in sorted(p.name for p in directory.iterdir()):
            _fsync(directory / name)
        marker: dict[str, Any] = {"version": version, "sha256": _sha256(directory / WEIGHTS_FILE)}
        if self.run_id is not None:
            marker["run"] = self.run_id
        (directory / READY_FILE).write_text(json.dumps(marker) + "\n")
        (directory / READY_FILE).chmod(CHECKPOINT_FILE_MODE)
        _fsync(directory / READY_FILE)
        self._prune(version)
        return directory

    def require_ready(self, version: int) -> Path:
        """The version's directory, after checking its READY marker against the weights and
        that a server could load it (see `model.check_checkpoint`)."""
        directory = self.path(version)
        marker = self._marker(directory)
        if marker.get("version") != version:
            raise BroadcastError(f"{directory}: READY names version {marker.get('version')}")
        if _sha256(directory / WEIGHTS_FILE) != marker.get("sha256"):
            raise BroadcastError(f"{directory}: {WEIGHTS_FILE} does not match its READY digest")
        try:
            check_checkpoint(directory)
        except CheckpointError as error:
            raise BroadcastError(str(error)) from error
        return directory

    def run_of(self, version: int) -> str | None:
        """The run that wrote `version` (READY's `run`); None for a checkpoint written by an
        older rolloutlog, which named none."""
        run = self._marker(self.path(version)).get("run")
        return None if run is None else str(run)

    def _marker(self, directory: Path) -> dict[str, Any]:
        ready = directory / READY_FILE
        if not ready.is_file():
            raise BroadcastError(f"{directory}: not ready (no {READY_FILE} marker)")
        try:
            marker = json.loads(ready.read_text())
        except json.JSONDecodeError as error:
            raise BroadcastError(f"{ready}: not JSON ({error})") from error
        if not isinstance(marker, dict):
            raise BroadcastError(f"{ready}: expected a JSON object")
        return marker

    def _prune(self, newest: int) -> None:
        for directory in self.root.glob("v*"):
            suffix = directory.name[1:]
            if suffix.isdigit() and int(suffix) <= newest - self.keep:
                shutil.rmtree(directory, ignore_errors=True)
