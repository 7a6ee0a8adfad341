"""The repository's own rules: layers (docs/contract.md § Layout), a pure core, lint, types."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rolloutlog"

# What each part may import from the others (events imports none of them).
ALLOWED = {
    "events": set(),
    "core": {"events.types"},
    "replay": {"core", "events"},
    "runtime": {"core", "events"},
    "record": {"core", "events"},
    "importers": {"core", "events", "record"},
    "integrations": {"core", "events", "record"},
    "testing": {"core", "events", "replay"},
    "runs": {"core", "events", "replay", "runtime"},
    "studies": {"core", "events", "replay", "runtime", "runs"},
    "cli": {"core", "events", "replay", "runtime", "runs", "studies", "record", "importers"},
}
# The core is pure: no clocks, no randomness, no I/O.
IMPURE = {
    "time",
    "datetime",
    "random",
    "secrets",
    "os",
    "io",
    "socket",
    "pathlib",
    "subprocess",
    "threading",
    "asyncio",
    "numpy",
    "pyarrow",
    "uuid",
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _part_files(part: str) -> list[Path]:
    return sorted((PACKAGE / part).rglob("*.py"))


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_parts_import_only_what_the_layout_allows(part):
    others = set(ALLOWED) - {part}
    for path in _part_files(part):
        for name in _imports(path):
            if not name.startswith("rolloutlog."):
                continue
            target = name.removeprefix("rolloutlog.")
            top = target.split(".")[0]
            if top in others:
                allowed = ALLOWED[part]
                ok = any(target == a or target.startswith(a + ".") for a in allowed)
                assert ok, f"{path.relative_to(ROOT)} imports {name}"


def test_hypothesis_is_imported_only_by_the_testing_package():
    """Hypothesis is a test dependency: the product must import without it."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(PACKAGE / "testing"):
            continue
        for name in _imports(path):
            assert name.split(".")[0] != "hypothesis", f"{path.relative_to(ROOT)} imports {name}"


def test_the_reference_model_imports_nothing_of_the_core():
    """The reference model is an independent implementation: it may share only the event
    classes (the vocabulary both speak) and its own modules, never core's code."""
    allowed = ("rolloutlog.events.types", "rolloutlog.testing.reference")
    files = _part_files("testing/reference")
    assert files, "rolloutlog/testing/reference/ is missing"
    for path in files:
        for name in _imports(path):
            if name.startswith("rolloutlog"):
                ok = any(name == a or name.startswith(a + ".") for a in allowed)
                assert ok, f"{path.relative_to(ROOT)} imports {name}"


def test_the_account_keeps_its_own_arithmetic():
    """The account is the independent check of the deciders (core.account): an off-by-one
    in their staleness or scoring must still be caught, so the account family imports only
    its own modules, the config, the dispatch registry and the run summary of the core."""
    allowed = ("account", "config", "registry", "run_summary")
    files = sorted((PACKAGE / "core").glob("account*.py"))
    assert files, "rolloutlog/core/account*.py is missing"
    for path in files:
        for name in _imports(path):
            if name.startswith("rolloutlog.core."):
                module = name.removeprefix("rolloutlog.core.")
                ok = module in allowed or module.startswith("account_")
                assert ok, f"{path.relative_to(ROOT)} imports {name}"


def test_core_is_pure():
    for path in _part_files("core"):
        for name in _imports(path):
            assert name.split(".")[0] not in IMPURE, f"{path.relative_to(ROOT)} imports {name}"


def test_no_bare_asserts_in_the_package():
    """Checks must survive `python -O`: the package raises explicit errors instead."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert not asserts, f"{path.relative_to(ROOT)}: bare assert on lines {asserts}"


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed in this environment (install the [test] extra)")
    return found


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_lint_and_types_are_clean(command):
    result = subprocess.run(
        [_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
