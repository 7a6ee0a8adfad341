"""prime-rl output folders built by verifiers' own record classes, in `.venv-verifiers`.

Without that environment (`scripts/verifiers-env`) the tests that need it are skipped,
saying why; with ROLLOUTLOG_REQUIRE_VERIFIERS=1 (CI) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDER = Path(__file__).with_name("build_prime_rl_run.py")


def verifiers_python() -> Path:
    venv = Path(os.environ.get("ROLLOUTLOG_VERIFIERS_VENV", ROOT / ".venv-verifiers"))
    python = venv / "bin" / "python"
    if not python.is_file():
        reason = f"no verifiers environment at {venv} (make it with scripts/verifiers-env)"
        if os.environ.get("ROLLOUTLOG_REQUIRE_VERIFIERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return python


@pytest.fixture(scope="session")
def built_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prime-rl output folder of 4 steps, written by verifiers 0.4.0's records."""
    out = tmp_path_factory.mktemp("prime-rl") / "run"
    subprocess.run(
        [str(verifiers_python()), str(BUILDER), str(out), "--seed", "1", "--steps", "4"],
        check=True,
        timeout=600,
    )
    return out


@pytest.fixture
def prime_run(built_run: Path, tmp_path: Path) -> Path:
    """A copy of the built folder that a test may damage."""
    copy = tmp_path / "run"
    shutil.copytree(built_run, copy)
    return copy
