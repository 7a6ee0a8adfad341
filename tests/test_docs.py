"""Every file path, dotted name and link that docs/ and README.md mention resolves in this tree.

Why: docs name modules, tests and scripts so that a reader can open them; a rename that
leaves a doc behind sends the reader to nothing. A path resolves from the repository root
or from a folder of the repository that it starts with (`core/sink.py` from `rolloutlog/`,
`live/driver.py` from `rolloutlog/runtime/`); a bare file name (`test_account.py`) must
name some file of the tree. A dotted name is ours when its first part names a module (at
any depth: `core.sink.decide`, `digest.canonical`, `rolloutlog.events.types.RunStarted`)
or a class or function defined at the top of one (`Account.on_scored`); it must then
resolve by import and attribute. A `--set` key named with its section (`run.batch_size`,
`world.late_arrival_rate`, `live.learning_rate`) must be a field of that section's
settings class. Other dotted text (`time.monotonic`), the log's metadata keys
(`rolloutlog.schema_version`) and placeholders (`<key>`, `*`, `...`, `KEY`, `run.key`) are
not names of this tree and are left alone.
A link (`[text](replay.md#digests)`) must name a file of the tree and, after `#`, a heading
of that file (as GitHub makes anchors of headings). A ```python example must parse, and
what it imports from the package (`from rolloutlog.core.loop import SINK`) and reads of
those names (`SINK.stop_reason`) must exist.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import attrs
import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.events.schema import NOTE_PREFIX
from rolloutlog.runtime.live.settings import LiveSettings
from rolloutlog.runtime.sim.world_config import WorldConfig

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rolloutlog"
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
URL = re.compile(r"[a-z]+://\S+")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(?<![\w./~-])((?:\.ci|\.?[\w-]+)/[\w./-]*[\w/](?:::\w+)?)")
FILE_NAME = re.compile(r"(?<![\w./-])([\w-]+\.(?:py|md|sh|toml|txt|js|css))(?![\w/])")
QUALIFIED = re.compile(r"(?<![\w./])(rolloutlog(?:\.\w+)+)")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
DATA_FILE = re.compile(
    r"\.(?:json|safetensors|arrow|jsonl|png|svg|pdf|html|csv|log|yaml|yml|toml)$"
)
SETTINGS: dict[str, type] = {"run": RunConfig, "world": WorldConfig, "live": LiveSettings}
LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTION = re.compile(r"([\w./-]+\.md)\s*§\s*((?:[^\n]|\n[\s#]*)[^\n]{0,80})")
PLACEHOLDER = re.compile(r"[<>*{}|]|\.\.\.|\bKEY\b")
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


# Top folders a tool makes beside the tree, not of it: scripts/mutation.sh's `mutants`.
NOT_OURS = frozenset({"mutants"})


def tree_files() -> list[Path]:
    """The tree's own files: no virtual environment (`.venv`, `.venv-vllm`,
    `.venv-verifiers`, ...: other packages' folders would shadow ours), no caches, and not
    mutmut's copy of the tree (`NOT_OURS`)."""
    skip = {".git", "__pycache__", ".ruff_cache", ".mypy_cache", ".hypothesis", *NOT_OURS}
    return [
        path
        for path in REPO.rglob("*")
        if path.is_file() and not _skipped(path.relative_to(REPO).parts, skip)
    ]


def _skipped(parts: tuple[str, ...], skip: set[str]) -> bool:
    return any(part in skip or part.startswith(".venv") for part in parts)


@cache
def folders() -> dict[str, list[Path]]:
    """Each folder name of the tree, and the folders that hold a folder of that name."""
    named: dict[str, list[Path]] = {}
    for path in tree_files():
        for parent in path.relative_to(REPO).parents:
            if parent.name:
                named.setdefault(parent.name, [])
                if REPO / parent.parent not in named[parent.name]:
                    named[parent.name].append(REPO / parent.parent)
    return named


@cache
def file_names() -> frozenset[str]:
    return frozenset(path.name for path in tree_files())


@cache
def modules() -> dict[str, list[str]]:
    """Every dotted suffix of every module of the package (`sink`, `core.sink`, ...) and
    the full module names it may stand for."""
    suffixes: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        for start in range(len(parts)):
            suffixes.setdefault(".".join(parts[start:]), []).append(".".join(parts))
    return suffixes


@cache
def top_level_names() -> dict[str, list[str]]:
    """Each class and function defined at the top of a package module, and its modules."""
    names: dict[str, list[str]] = {}
    for suffix, full_names in modules().items():
        for full in full_names:
            if suffix != full:
                continue
            path = REPO / Path(*full.split("."))
            source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            for node in ast.parse(source.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    names.setdefault(node.name, []).append(full)
    return names


def mentions() -> Iterator[tuple[str, str]]:
    """(doc, text) for each doc: its whole text, URLs removed."""
    for doc in DOCS:
        yield doc.relative_to(REPO).as_posix(), URL.sub(" ", doc.read_text(encoding="utf-8"))


def paths_in(text: str) -> set[str]:
    found = {match.rstrip(".") for match in PATH.findall(text)}
    for span in CODE_SPAN.findall(text):
        found.update(FILE_NAME.findall(span))
    return {path for path in found if not PLACEHOLDER.search(path)}


def dotted_names_in(text: str) -> set[str]:
    found = set(QUALIFIED.findall(text))
    for span in CODE_SPAN.findall(text):
        name = re.sub(r"\(.*\)$", "", span.strip())
        if DOTTED.match(name) and not FILE_NAME.fullmatch(name) and not DATA_FILE.search(name):
            found.add(name)
    return {name for name in found if not PLACEHOLDER.search(name)}


def path_resolves(mention: str) -> bool:
    path, _, test_name = mention.partition("::")
    if "/" not in path:
        return path in file_names()
    first = path.split("/", 1)[0]
    ours = first not in NOT_OURS and (REPO / first).exists()
    if not ours and not path.endswith("/") and "." not in path[-5:]:
        return True  # `events/s`: a unit, not a file of this tree
    roots = [REPO, *folders().get(first, [])]
    for root in roots:
        target = root / path
        if target.exists():
            return not test_name or f"def {test_name}(" in target.read_text(encoding="utf-8")
    return first not in folders() and not ours  # not a path of this tree


def instance_attributes(cls: type) -> set[str]:
    """The names a class's methods assign on `self` (`self.digest = ...`)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return set()
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def has(target: object, attribute: str) -> bool:
    """An attribute of `target`; of a class, also one its instances are given; of a module,
    also one of its classes' (`loop.digest`: the digest of the module's `ReactionLoop`)."""
    if hasattr(target, attribute):
        return True
    if isinstance(target, type):
        return attribute in instance_attributes(target)
    if isinstance(target, ModuleType):
        classes = [
            value
            for value in vars(target).values()
            if isinstance(value, type) and value.__module__ == target.__name__
        ]
        return any(has(cls, attribute) for cls in classes)
    return False


def resolves(full_module: str, attributes: list[str]) -> bool:
    try:
        target: object = importlib.import_module(full_module)
    except ImportError:
        return False
    for index, attribute in enumerate(attributes):
        submodule = f"{full_module}.{attribute}"
        if isinstance(target, ModuleType) and submodule in modules().get(submodule, []):
            return resolves(submodule, attributes[index + 1 :])
        if not has(target, attribute):
            return False
        if not hasattr(target, attribute):
            return True  # an instance's attribute: its own attributes are not checked
        target = getattr(target, attribute)
    return True


def docstrings() -> Iterator[tuple[str, str]]:
    """(module, text) for each package module: its docstrings, URLs removed."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        texts = [ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds)]
        yield path.relative_to(REPO).as_posix(), URL.sub(" ", "\n".join(filter(None, texts)))


def name_resolves(name: str, *, classes: bool = True) -> bool:
    parts = name.split(".")
    if parts[0] == "rolloutlog" and len(parts) == 2 and name not in modules():
        return True  # a key of the log's metadata (`rolloutlog.schema_version`)
    if name.startswith(NOTE_PREFIX) and len(parts) == 3:
        return True  # a note in the log's metadata (`rolloutlog.note.import`)
    if parts[0] in SETTINGS and len(parts) == 2:  # a `--set` key, not a module's name
        return parts[1] == "key" or parts[1] in attrs.fields_dict(SETTINGS[parts[0]])
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in modules():
            return any(resolves(full, parts[cut:]) for full in modules()[prefix])
    if classes and parts[0] in top_level_names():
        return any(resolves(full, parts) for full in top_level_names()[parts[0]])
    return not name.startswith("rolloutlog.")  # not a name of this tree


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives the headings of `doc`."""
    headings = re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def link_resolves(doc: Path, link: str) -> bool:
    if re.match(r"[a-z]+:", link):
        return True  # a URL
    target, _, anchor = link.partition("#")
    path = (doc.parent / target).resolve() if target else doc
    return path.exists() and (not anchor or anchor in anchors(path))


def unresolved_in_example(block: str) -> list[str]:
    """The names a Python example imports from the package, and the attributes it reads of
    them, that do not exist (`SINK.fingerprint` where `Decider` has no such field)."""
    tree = ast.parse(block)
    imported: dict[str, object] = {}
    missing: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rolloutlog"):
            try:
                module = importlib.import_module(node.module or "")
            except ImportError:
                missing.append(node.module or "")
                continue
            for alias in node.names:
                if hasattr(module, alias.name):
                    imported[alias.asname or alias.name] = getattr(module, alias.name)
                else:
                    missing.append(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
            and not has(imported[node.value.id], node.attr)
        ):
            missing.append(f"{node.value.id}.{node.attr}")
    return missing


def test_the_checks_catch_a_wrong_path_and_a_wrong_name() -> None:
    assert path_resolves("rolloutlog/core/sink.py") and path_resolves("core/sink.py")
    assert path_resolves("live/driver.py") and path_resolves("test_replay_docs.py")
    assert not path_resolves("rolloutlog/core/sinks.py") and not path_resolves("core/sinks.py")
    assert not path_resolves("tests/replay/test_replay_docs.py::test_nothing")
    assert not path_resolves("no_such_test.py")
    assert name_resolves("core.sink.decide") and name_resolves("testing.equivalence")
    assert name_resolves("rolloutlog.events.types.RunStarted")
    assert not name_resolves("replay.equivalence") and not name_resolves("core.sink.decides")
    assert not name_resolves("rolloutlog.core.nothing")
    assert name_resolves("loop.digest") and name_resolves("LogReader.schema_version")
    assert not name_resolves("loop.digests") and not name_resolves("LogReader.schema")
    assert name_resolves("run.batch_size")  # a setting's name, not a module's
    assert name_resolves("world.late_arrival_rate") and name_resolves("live.learning_rate")
    assert not name_resolves("run.batch_sizes") and not name_resolves("world.batch_size")
    assert not name_resolves("live.max_off_policy_steps")
    assert not dotted_names_in("`model.safetensors` and `config.json`")  # files, not names
    replay = REPO / "docs" / "replay.md"
    assert link_resolves(replay, "#every-key-of-replay---json")
    assert link_resolves(replay, "log-format.md#torn-tails") and link_resolves(replay, "img")
    assert not link_resolves(replay, "#no-such-heading")
    assert not link_resolves(replay, "log-formats.md") and not link_resolves(replay, "x.md#a")
    sink = "from rolloutlog.core.loop import SINK as sink\n"
    assert not unresolved_in_example(sink + "sink.stop_reason(state)")
    assert unresolved_in_example(sink + "sink.fingerprint(state)") == ["sink.fingerprint"]
    assert unresolved_in_example("from rolloutlog.core.loop import Nothing") == [
        "rolloutlog.core.loop.Nothing"
    ]
    assert unresolved_in_example("from rolloutlog.core.nothing import x") == [
        "rolloutlog.core.nothing"
    ]


@pytest.mark.parametrize(("doc", "text"), list(mentions()), ids=[d.name for d in DOCS])
def test_every_path_a_doc_mentions_exists(doc: str, text: str) -> None:
    missing = sorted(path for path in paths_in(text) if not path_resolves(path))
    assert not missing, f"{doc} names paths that are not in the tree: {missing}"


@pytest.mark.parametrize(("doc", "text"), list(mentions()), ids=[d.name for d in DOCS])
def test_every_dotted_name_a_doc_mentions_resolves(doc: str, text: str) -> None:
    missing = sorted(name for name in dotted_names_in(text) if not name_resolves(name))
    assert not missing, f"{doc} names modules or attributes that do not resolve: {missing}"


@pytest.mark.parametrize(("doc", "text"), list(mentions()), ids=[d.name for d in DOCS])
def test_every_name_a_python_example_takes_from_the_package_resolves(doc: str, text: str) -> None:
    missing = sorted(
        name for block in PYTHON_BLOCK.findall(text) for name in unresolved_in_example(block)
    )
    assert not missing, f"{doc}'s Python examples name what the package does not have: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_link_of_a_doc_resolves(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = sorted(link for link in LINK.findall(text) if not link_resolves(doc, link))
    assert not missing, f"{doc.name} links to files or headings that do not exist: {missing}"


def test_every_path_and_module_name_a_docstring_mentions_resolves() -> None:
    """The package's docstrings too; there a class's dotted name may be another library's
    (vLLM's `SamplingParams`), so only names that start with a module's are checked."""
    missing = {
        module: sorted(
            [path for path in paths_in(text) if not path_resolves(path)]
            + [name for name in dotted_names_in(text) if not name_resolves(name, classes=False)]
        )
        for module, text in docstrings()
    }
    assert not {module: names for module, names in missing.items() if names}


def section_resolves(source: Path, doc: str, text: str) -> bool:
    """A section named in prose (a doc's file name, `§`, a heading): the file exists (from
    the repository root, or beside the text that names it) and the words after `§` start
    with one of its headings, a heading that a line break may split."""
    target = next((root / doc for root in (REPO, source.parent) if (root / doc).is_file()), None)
    if target is None:
        return False
    words = re.sub(r"\s*\n[\s#]*", " ", text).strip()
    headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.MULTILINE)
    return any(re.match(re.escape(heading) + r"(?![\w])", words) for heading in headings)


def section_mentions() -> Iterator[tuple[str, str, str]]:
    """(file, doc, words) for each section named by a doc's file name, `§` and a heading,
    in the docs, the benchmark results and every Python file of the tree: a section named
    in prose has no link for the link test to check."""
    sources = [*DOCS, REPO / "benchmarks" / "RESULTS.md"]
    sources += [path for path in tree_files() if path.suffix == ".py"]
    for source in sources:
        for doc, words in SECTION.findall(source.read_text(encoding="utf-8")):
            yield source.relative_to(REPO).as_posix(), doc, words


def test_a_wrong_section_name_is_caught() -> None:
    here = REPO / "rolloutlog" / "record" / "recorder.py"
    assert section_resolves(here, "docs/runtime.md", "Crashes and resume says why")
    assert section_resolves(REPO / "docs" / "x.md", "contract.md", "Decisions and\n# departures")
    assert not section_resolves(here, "docs/contract.md", "Run end).")
    assert not section_resolves(here, "docs/contracts.md", "Events")
    assert not section_resolves(here, "docs/contract.md", "Eventsfoo")


def test_every_section_a_file_names_is_a_heading_of_that_doc() -> None:
    missing = [
        f"{source}: {doc} § {words.splitlines()[0]}"
        for source, doc, words in section_mentions()
        if not section_resolves(REPO / source, doc, words)
    ]
    assert not missing, f"sections that are not headings of their doc: {missing}"


def test_the_log_format_examples_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/log-format.md's Python examples, in a fresh folder, in order: the Recorder's run
    (replayed as the text says), then the third-party checksum check and plain pyarrow
    reading it. The checksum snippet used a helper defined further down."""
    from rolloutlog.replay.log_replay import replay_log
    from rolloutlog.replay.source import open_log

    text = (REPO / "docs" / "log-format.md").read_text()
    blocks = {
        block.split("\n", 1)[0]: block
        for block in PYTHON_BLOCK.findall(text)
        if "run.arrow" in block
    }
    monkeypatch.chdir(tmp_path)
    recorder = next(b for b in blocks.values() if "Recorder(" in b)
    exec(compile(recorder, "log-format.md (Recorder)", "exec"), {})
    summary = replay_log(open_log("run.arrow")).summary
    assert (summary["events"], summary["steps_shipped"], summary["invariant_violations"]) == (
        43,
        2,
        [],
    )
    assert "43 events, 2 steps shipped,\n4 groups finalized" in text
    for block in blocks.values():
        if block is not recorder:
            exec(compile(block, "log-format.md", "exec"), {"print": lambda *a: None})
