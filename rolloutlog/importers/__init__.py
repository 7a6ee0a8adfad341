"""Importers of other stacks' run folders (prime-rl, AReaL): their world facts as a log.

See docs/foreign-runs.md for what each reconstructs and what it must assume.
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from rolloutlog.importers.areal import import_areal
from rolloutlog.importers.errors import ForeignRunError
from rolloutlog.importers.prime_rl import IMPORT_NOTE, import_prime_rl

Importer = Callable[[str | os.PathLike[str], str | os.PathLike[str]], dict[str, Any]]
IMPORTERS: Final[dict[str, Importer]] = {"prime-rl": import_prime_rl, "areal": import_areal}


def detect(folder: Path) -> str:
    """Which stack wrote `folder`: `prime-rl` (its configs/orchestrator.json) or `areal`."""
    if (folder / "configs" / "orchestrator.json").is_file():
        return "prime-rl"
    if next(folder.rglob("sessions*.jsonl"), None) is not None:
        return "areal"
    raise ForeignRunError(
        f"{folder}: neither a prime-rl run (no configs/orchestrator.json) nor an AReaL run "
        "(no sessions*.jsonl)"
    )


__all__ = [
    "IMPORTERS",
    "IMPORT_NOTE",
    "ForeignRunError",
    "detect",
    "import_areal",
    "import_prime_rl",
]
