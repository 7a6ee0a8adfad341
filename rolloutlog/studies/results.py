"""The results table of a sweep: one row per cell, kept in one Parquet file.

A row holds the cell (`scenario`, `preset`, `seed`, `steps` and one column per `--set`
key, named `run.KEY` or `world.KEY`), the `scenario_digest` of its scenario (see
`grid.scenario_digest`), and every key of the cell's `simulate --json` report under the
same name (`policy` is the policy the report names). Report values that are objects or
lists (`episodes_cancelled`, `trained_age_histogram`, ...) are stored as JSON text;
`decode_row` turns them back. Rows are sorted by the cell, so that the same
cells give the same table whichever engine ran them and in whatever order they finished.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from rolloutlog.events.whole_file import written_whole
from rolloutlog.runs.simulate import run_policy
from rolloutlog.studies.grid import Cell, value_kind

CELL_COLUMNS = ("scenario", "preset", "seed", "steps")
DIGEST_COLUMN = "scenario_digest"
R = TypeVar("R", bound=Mapping[str, Any])
DROPPED_KEYS = frozenset({"log"})  # a sweep writes no logs


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell (in whatever process an engine chose) and return its row."""
    report, _ = run_policy(cell.scenario(), check=cell.check)
    row: dict[str, Any] = {
        "scenario": cell.name,
        "preset": cell.preset,
        "seed": cell.seed,
        "steps": cell.steps,
        **dict(cell.settings),
        DIGEST_COLUMN: cell.digest,
    }
    for key, value in report.items():
        if key not in DROPPED_KEYS and key not in row:
            row[key] = _encoded(value)
    return row


def probe_row(cell: Cell) -> dict[str, Any]:
    """The row of `cell` run for one step (milliseconds): the columns and kinds of value
    every row of its sweep has, known before the grid runs."""
    return run_cell(attrs.evolve(cell, steps=1))


def _encoded(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


def decode_row(row: Mapping[str, Any], json_columns: Iterable[str]) -> dict[str, Any]:
    """A row with its JSON columns parsed back into the report's objects and lists."""
    decoded = dict(row)
    for key in json_columns:
        if isinstance(decoded.get(key), str):
            decoded[key] = json.loads(decoded[key])
    return decoded


def setting_columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The `--set` columns among the rows' columns, in order of first appearance."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update((key, None) for key in row if key.startswith(("run.", "world.")))
    return list(seen)


def row_key(row: Mapping[str, Any], setting_keys: Sequence[str]) -> tuple[Any, ...]:
    """The identity of the cell a row holds; matches `Cell.key` for the same columns."""
    return (*(row[c] for c in CELL_COLUMNS), *(row.get(k) for k in setting_keys))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an existing results file, or none when there is no file yet."""
    if not path.exists():
        return []
    table = pq.read_table(path)
    missing = [c for c in CELL_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: not a sweep results table (no {missing[0]!r} column)")
    return list(table.to_pylist())


def require_kinds(rows: Iterable[Mapping[str, Any]], sample: Mapping[str, Any]) -> None:
    """Refuse rows (a table read back) with another kind of value in a column than a new row
    (`sample`) has: a seed edited into text matches no cell, and breaks sorting and writing
    the table only after the whole grid ran."""
    kinds = {name: value_kind(value) for name, value in sample.items() if value is not None}
    for row in rows:
        for name, kind in kinds.items():
            value = row.get(name)
            if value is not None and value_kind(value) != kind:
                raise ValueError(
                    f"column {name!r} holds {value_kind(value)} values ({value!r}) where a sweep "
                    f"writes {kind} (edited by hand?)"
                )


def require_same_scenarios(rows: Iterable[Mapping[str, Any]], cells: Iterable[Cell]) -> None:
    """Refuse rows of a scenario name run from other settings than this grid's scenario of
    that name (an edited file, another file of the name, a changed default): resuming would
    mix two scenarios under one name. Rows without a digest (older tables) pass unchecked."""
    ours = {cell.name: cell for cell in cells}
    for row in rows:
        cell = ours.get(row["scenario"])
        if cell is not None and row.get(DIGEST_COLUMN) not in (None, cell.digest):
            raise ValueError(
                f"its rows of scenario {cell.name!r} ran other settings than {cell.source} "
                "has now (an edited or another scenario of that name, or a changed default); "
                "write to another -o, or rename the scenario"
            )


def require_writable(path: Path) -> None:
    """Create and remove a file beside `path`, as saving the table does: a folder it cannot
    be written to fails now, not at the first save after cells ran."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
        pass


def sorted_rows(rows: Sequence[R]) -> list[R]:
    """The rows in cell order: scenario, preset, seed, steps, then the settings."""
    keys = setting_columns(rows)
    return sorted(rows, key=lambda row: _sortable(row_key(row, keys)))


def to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The rows as one table, sorted by cell; columns in order of first appearance."""
    ordered = sorted_rows(rows)
    names: dict[str, None] = {}
    for row in ordered:
        names.update(dict.fromkeys(row))
    return pa.table({name: pa.array([row.get(name) for row in ordered]) for name in names})


def _sortable(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """Nulls last within a column; a column's values are of one kind (see `grid`)."""
    return tuple((value is None, 0 if value is None else value) for value in key)


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the table whole, under a temporary name renamed into place: never half a file."""
    with written_whole(path) as temporary:
        pq.write_table(to_table(rows), temporary)
