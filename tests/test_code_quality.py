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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of ours it imports, type-only imports
    (under `TYPE_CHECKING`) included: `from a import b` names module `a.b` where b is one."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    """No module of the package imports itself back through others, not even for types:
    with no circle every arrow runs down, so the modules of `core/` read in one order."""
    assert _circles(_import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a planted two-module and three-module circle are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_circles(graph)) == [["a", "b"], ["c", "d", "e"]]


FUNCTION_LINES_MAX = 70


def _long_functions(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function longer than `FUNCTION_LINES_MAX`, from its
    `def` line to its last (decorators aside)."""
    return [
        (node.name, node.lineno, lines)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > FUNCTION_LINES_MAX
    ]


def test_functions_fit_on_a_screen():
    """Every function of the package is at most 70 lines, so it can be read whole."""
    found = {
        f"{path.relative_to(ROOT)}:{line} {name}": lines
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, line, lines in _long_functions(ast.parse(path.read_text(), filename=str(path)))
    }
    assert found == {}, f"functions over {FUNCTION_LINES_MAX} lines: {found}"


def test_the_length_check_finds_a_long_function():
    """The check above can fail: a planted 71-line function is found, a 70-line one not."""
    body = "    x = 0\n" * 69
    tree = ast.parse(f"def long():\n{body}    return x\n\ndef short():\n{body}")
    assert [(name, lines) for name, _, lines in _long_functions(tree)] == [("long", 71)]


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
    its own modules, the config, the dispatch registry, the run summary and the handler
    table of the core."""
    allowed = ("account", "config", "registry", "run_summary", "handlers")
    files = sorted((PACKAGE / "core" / "account").glob("*.py"))
    assert files, "rolloutlog/core/account/ is missing"
    for path in files:
        for name in _imports(path):
            if name.startswith("rolloutlog.core."):
                module = name.removeprefix("rolloutlog.core.")
                ok = module in allowed or module.startswith("account.")
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
