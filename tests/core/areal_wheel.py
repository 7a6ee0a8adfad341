"""AReaL's own `StalenessManager`, loaded by path from the areal 1.0.4 wheel.

Importing the `areal` package pulls in its training stack (torch below 2.11, hydra, ray,
...), so the one module is read out of the wheel (`scripts/areal-wheel` downloads it into
`.areal/`) and run with the smallest stand-in for the one name it imports:
`areal.api.RolloutStat`, a record of four counts, as areal/api/io_struct.py defines it.
The stand-in is in `sys.modules` only while the module loads; the logic under test is
AReaL's own. Without the wheel the tests that need it are skipped, saying why; with
ROLLOUTLOG_REQUIRE_AREAL=1 (CI) they fail instead.
"""

from __future__ import annotations

import os
import sys
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEEL = ROOT / ".areal" / "areal-1.0.4-py3-none-any.whl"
MODULE = "areal/infra/staleness_manager.py"


@dataclass
class RolloutStat:
    """areal/api/io_struct.py's RolloutStat in 1.0.4: four counts, each 0 to start."""

    accepted: int = 0
    enqueued: int = 0
    rejected: int = 0
    running: int = 0


def areal_wheel() -> Path:
    """The wheel (ROLLOUTLOG_AREAL_WHEEL, else `.areal/`), or skip (fail in CI) saying why."""
    wheel = Path(os.environ.get("ROLLOUTLOG_AREAL_WHEEL", WHEEL))
    if not wheel.is_file():
        reason = f"no AReaL wheel at {wheel} (download it with scripts/areal-wheel)"
        if os.environ.get("ROLLOUTLOG_REQUIRE_AREAL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return wheel


def load_staleness_manager(wheel: Path) -> types.ModuleType:
    """`areal.infra.staleness_manager` from `wheel`, its one import stood in for."""
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read(MODULE).decode()
    api = types.ModuleType("areal.api")
    api.RolloutStat = RolloutStat  # type: ignore[attr-defined]
    stand_ins = {"areal": types.ModuleType("areal"), "areal.api": api}
    module = types.ModuleType("areal.infra.staleness_manager")
    module.__file__ = f"{wheel}/{MODULE}"
    with mock.patch.dict(sys.modules, stand_ins):
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
