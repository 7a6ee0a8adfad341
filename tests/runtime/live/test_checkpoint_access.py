"""Checkpoints a server running as another user can load, and the check made before a reload."""

from __future__ import annotations

import json
import os
import stat

import pytest

from rolloutlog.runtime.live.broadcast import READY_FILE, BroadcastError, WeightBroadcast
from rolloutlog.runtime.live.model import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    build_model,
    check_checkpoint,
    save_checkpoint,
)


def _mode(path: os.PathLike[str]) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def strict_umask():
    """umask 077, as on a locked-down account: nothing we write may rely on the umask."""
    before = os.umask(0o077)
    yield
    os.umask(before)


def test_checkpoint_files_are_written_0644_whatever_the_umask(tmp_path, strict_umask):
    save_checkpoint(build_model(seed=0), tmp_path / "ckpt")
    assert {name: _mode(tmp_path / "ckpt" / name) for name in (CONFIG_FILE, WEIGHTS_FILE)} == {
        CONFIG_FILE: 0o644,
        WEIGHTS_FILE: 0o644,
    }


def test_broadcast_versions_are_readable_by_group_and_others(tmp_path, strict_umask):
    path = WeightBroadcast(tmp_path / "weights").publish(build_model(seed=0), 3)
    assert _mode(path) == 0o755
    assert {_mode(path / name) for name in (CONFIG_FILE, WEIGHTS_FILE, READY_FILE)} == {0o644}


def test_a_checkpoint_others_cannot_read_is_refused_before_any_reload(tmp_path):
    broadcast = WeightBroadcast(tmp_path)
    path = broadcast.publish(build_model(seed=0), 1)
    (path / WEIGHTS_FILE).chmod(0o600)
    with pytest.raises(BroadcastError, match=r"mode 0600 is not readable by group and others"):
        broadcast.require_ready(1)


def test_a_checkpoint_whose_config_does_not_fit_its_weights_is_refused(tmp_path):
    broadcast = WeightBroadcast(tmp_path)
    path = broadcast.publish(build_model(seed=0), 1)
    config = json.loads((path / CONFIG_FILE).read_text())
    (path / CONFIG_FILE).write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(BroadcastError, match="missing tensors"):
        broadcast.require_ready(1)
    (path / CONFIG_FILE).write_text("{")
    with pytest.raises(BroadcastError, match=r"unreadable \(JSONDecodeError"):
        broadcast.require_ready(1)
    (path / CONFIG_FILE).unlink()
    with pytest.raises(BroadcastError, match=r"config\.json: no such file"):
        broadcast.require_ready(1)


def test_a_complete_checkpoint_passes_the_check(tmp_path):
    save_checkpoint(build_model(seed=1), tmp_path)
    check_checkpoint(tmp_path)
    (tmp_path / WEIGHTS_FILE).unlink()
    with pytest.raises(CheckpointError, match="no such file"):
        check_checkpoint(tmp_path)
