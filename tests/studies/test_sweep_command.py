"""`rolloutlog sweep`: on Ray (local) and in processes the same table, each row what
`simulate --json` reports for that cell alone; finished cells are skipped; errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rolloutlog.cli.simulate import simulate_command
from rolloutlog.cli.sweep import sweep_command
from rolloutlog.studies.results import decode_row

GRID = [
    "--scenario",
    "smoke",
    "--compare",
    "per-episode,all",
    "--seeds",
    "0",
    "--set",
    "world.failure_rate=0,0.2",
    "--steps",
    "3",
]
JSON_COLUMNS = (
    "episodes_cancelled",
    "trained_age_histogram",
    "invariant_violations",
    "rollout_seconds_by_fate",
    "episodes_by_fate",
)


def sweep(*args: str) -> Any:
    return CliRunner().invoke(sweep_command, list(args), catch_exceptions=False)


def alone(row: dict[str, Any]) -> dict[str, Any]:
    """What `simulate --json` reports for the cell of `row`, run on its own."""
    args = ["--scenario", row["scenario"], "--policy", row["preset"], "--json"]
    args += ["--seed", str(row["seed"]), "--steps", str(row["steps"]), "--check"]
    args += ["--set", f"world.failure_rate={row['world.failure_rate']}"]
    result = CliRunner().invoke(simulate_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    del report["log"]
    return report


@pytest.mark.usefixtures("local_ray")
def test_ray_and_processes_give_one_table_equal_to_simulate_alone(tmp_path: Path) -> None:
    on_ray, in_processes = tmp_path / "ray.parquet", tmp_path / "processes.parquet"
    result = sweep(*GRID, "--check", "--engine", "ray", "-o", str(on_ray))
    assert result.exit_code == 0, result.stderr
    assert "running 4 on ray" in result.stderr
    result = sweep(
        *GRID, "--check", "--workers", "2", "--engine", "processes", "-o", str(in_processes)
    )
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(on_ray)
    assert table.equals(pq.read_table(in_processes))
    assert table.num_rows == 4
    for row in table.to_pylist():
        cell_only = ("preset", "steps", "world.failure_rate", "scenario_digest")
        figures = {k: v for k, v in decode_row(row, JSON_COLUMNS).items() if k not in cell_only}
        report = alone(row)
        assert figures == report
        assert report["invariant_violations"] == []


def test_a_second_run_skips_finished_cells_and_adds_the_new(tmp_path: Path) -> None:
    output = tmp_path / "results.parquet"
    first = sweep(*GRID, "--engine", "processes", "--workers", "1", "-o", str(output))
    assert first.exit_code == 0, first.stderr
    before = pq.read_table(output)
    again = sweep(*GRID, "--engine", "processes", "-o", str(output))
    assert "4 already in" in again.stderr and "running 0" in again.stderr
    assert pq.read_table(output).equals(before)
    seeds = GRID.index("--seeds") + 1
    wider_grid = [*GRID[:seeds], "0-1", *GRID[seeds + 1 :]]  # --seeds takes one value
    wider = sweep(*wider_grid, "--engine", "processes", "-o", str(output))
    assert wider.exit_code == 0, wider.stderr
    assert "4 already in" in wider.stderr and "running 4" in wider.stderr
    after = pq.read_table(output).to_pylist()
    assert len(after) == 8
    assert [r for r in after if r["seed"] == 0] == before.to_pylist()


def test_best_and_plot(tmp_path: Path) -> None:
    output, plot = tmp_path / "results.parquet", tmp_path / "sweep.png"
    result = sweep(
        *GRID,
        "--engine",
        "processes",
        "-o",
        str(output),
        "--plot",
        str(plot),
        "--best",
        "max trained_per_hour where discarded <= per-episode",
    )
    assert result.exit_code == 0, result.stderr
    assert plot.stat().st_size > 10_000
    assert "best: max trained_episodes_per_hour where finished_rollouts_discarded" in result.stdout
    assert "smoke:" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "4-1"], "--seeds '4-1'"),
        (["--set", "group_size=4,many"], "mixes"),
        (["--compare", "per-episode+turbo"], "unknown rule 'turbo'"),
        (["--address", "127.0.0.1:1"], "runs on a Ray cluster"),  # with --engine processes
        (["--address", "127.0.0.1:1", "--workers", "2"], "exclude each other"),
        (["--best", "max speed"], "unknown metric 'speed'"),
        (["--best", "max trained_per_hour where"], "the 'where' clause is empty"),
        (["--best", "max trained_per_hour where discarded <= all"], "needs preset 'all'"),
        (["--seeds", "99999999999999999999999"], "99999999999999999999999 is above the largest"),
        (["--set", "max_inflight=4,4"], "names 4 twice"),
        (["--set", "max_inflight=4,"], "value 2 of 2 is empty"),
        (["--scenario", "smoke"], "--scenario smoke: given twice"),
        (
            ["--set", "staleness=per-group", "--compare", "per-episode,per-group"],
            "--compare: presets per-episode and per-group both run per-group",
        ),
        (["--seeds", "0-100000000"], "100,000,001 seeds, more than the 10,000 cells"),
        (
            ["--seeds", "0-1", "--set", "max_inflight=4,8", "--max-cells", "3"],
            "the grid has 4 cells (1 scenario × 1 preset × 2 --set combinations × 2 seeds)",
        ),
    ],
)
def test_bad_options_are_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    """Each before any cell runs: nothing is written."""
    result = sweep(
        "--scenario",
        "smoke",
        "--steps",
        "1",
        "--engine",
        "processes",
        *args,
        "-o",
        str(tmp_path / "r.parquet"),
    )
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "running" not in result.stderr and not (tmp_path / "r.parquet").exists()


@pytest.fixture
def unwritable_folder(tmp_path: Path) -> Path:
    """A folder no file can be made in: read-only, or (for root, whom modes do not stop)
    /sys, if that refuses."""
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    for candidate in (folder, Path("/sys")):
        try:
            (candidate / "probe").touch()
        except OSError:
            return candidate
        (candidate / "probe").unlink()
    pytest.skip("no folder here refuses new files")


def test_an_output_folder_that_takes_no_file_is_refused_before_any_cell_runs(
    unwritable_folder: Path,
) -> None:
    """The whole grid ran, and every result was lost at the first save."""
    output = unwritable_folder / "r.parquet"
    result = sweep(
        "--scenario", "smoke", "--steps", "1", "--engine", "processes", "-o", str(output)
    )
    assert result.exit_code == 2
    assert f"-o {output}: cannot write the table in {unwritable_folder}" in result.stderr
    assert "running" not in result.stderr and "Traceback" not in result.stderr


def test_another_scenario_of_a_name_is_refused_in_a_sweep_and_in_its_table(
    tmp_path: Path,
) -> None:
    """A file named like a built-in was merged with it into one row, and resuming with it
    mixed its rows with the built-in's. A table without digests (older) still resumes."""
    other = tmp_path / "alt" / "smoke.toml"
    other.parent.mkdir()
    other.write_text("steps = 5\n[run]\nmax_inflight = 5\n")
    output = tmp_path / "r.parquet"
    cell = ["--steps", "1", "--engine", "processes", "--workers", "1", "-o", str(output)]
    both = sweep("--scenario", "smoke", "--scenario", str(other), *cell)
    assert both.exit_code == 2
    assert f"--scenario smoke and --scenario {other} are both named 'smoke'" in both.stderr
    assert sweep("--scenario", "smoke", *cell).exit_code == 0
    before = pq.read_table(output)
    resumed = sweep("--scenario", str(other), *cell)
    assert resumed.exit_code == 2
    assert f"scenario 'smoke' ran other settings than {other} has now" in resumed.stderr
    assert pq.read_table(output).equals(before)
    pq.write_table(before.drop_columns(["scenario_digest"]), output)
    older = sweep("--scenario", "smoke", *cell)
    assert older.exit_code == 0 and "1 already in" in older.stderr


def test_a_table_edited_by_hand_is_refused_before_any_cell_runs(tmp_path: Path) -> None:
    """Seeds edited into text made every cell run again, then sorting failed, losing them."""
    output = tmp_path / "r.parquet"
    cell = ["--scenario", "smoke", "--steps", "1", "--engine", "processes", "-o", str(output)]
    assert sweep(*cell).exit_code == 0
    table = pq.read_table(output)
    edited = table.set_column(
        table.column_names.index("seed"),
        "seed",
        pa.array([str(s) for s in table["seed"].to_pylist()]),
    )
    pq.write_table(edited, output)
    result = sweep(*cell, "--seeds", "0-1")
    assert result.exit_code == 2
    assert f"-o {output}: column 'seed' holds str values ('0')" in result.stderr
    assert "running" not in result.stderr
    assert pq.read_table(output).equals(edited)


def test_the_overview_tells_configurations_apart_at_80_columns(tmp_path: Path) -> None:
    """Labels were cut at the column's width: two rows read `max_off_policy_steps…`."""
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        sweep_command,
        [
            "--scenario",
            "smoke",
            "--compare",
            "per-episode+straggler+oldest-first",
            "--set",
            "max_off_policy_steps=1,2",
            "--set",
            "world.late_arrival_rate=0.1,0.25",
            "--steps",
            "2",
            "--engine",
            "processes",
            "-o",
            str(tmp_path / "r.parquet"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    labels = [
        f"per-episode+straggler+oldest-first max_off_policy_steps={m} late_arrival_rate={r}"
        for m in (1, 2)
        for r in (0.1, 0.25)
    ]
    assert _configurations(result.stdout) == [label.replace(" ", "") for label in labels]


def _configurations(table: str) -> list[str]:
    """The configuration column of a printed overview, each cell's lines joined."""
    cells: list[str] = []
    for line in table.splitlines():
        parts = line.split("│")
        if len(parts) < 3:
            continue
        if parts[1].strip():  # a scenario: a new configuration starts
            cells.append("")
        cells[-1] += parts[2].strip()
    return cells


def test_an_output_that_is_not_a_results_table_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    pq.write_table(pq.read_table(_write_any(tmp_path)), other)
    result = sweep("--scenario", "smoke", "--steps", "1", "-o", str(other))
    assert result.exit_code == 2
    assert "not a sweep results table" in result.stderr


def _write_any(tmp_path: Path) -> Path:
    path = tmp_path / "any.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    return path


def test_an_address_where_no_cluster_answers_is_refused_at_once(tmp_path: Path) -> None:
    output = tmp_path / "r.parquet"
    result = sweep(
        "--scenario", "smoke", "--steps", "1", "--address", "127.0.0.1:1", "-o", str(output)
    )
    assert result.exit_code == 2
    assert "--address 127.0.0.1:1: no Ray cluster answers there" in result.stderr
    assert "Traceback" not in result.stderr
    assert not output.exists()  # nothing ran, nothing written
    result = sweep("--scenario", "smoke", "-o", str(tmp_path / "missing" / "r.parquet"))
    assert result.exit_code == 2 and "no directory" in result.stderr


def test_its_overview_prints_waste_and_rate_as_simulate_does(tmp_path: Path) -> None:
    cell = ["--scenario", "smoke", "--compare", "per-episode", "--steps", "5"]
    output = str(tmp_path / "r.parquet")
    result = sweep(*cell, "--engine", "processes", "--workers", "1", "-o", output)
    assert result.exit_code == 0, result.stderr
    simulated = CliRunner().invoke(simulate_command, ["--scenario", "smoke"])
    assert "3.77 min (53.5%)" in simulated.stdout and "/ minute" in simulated.stdout
    assert "wasted (min)" in result.stdout and "trained / min" in result.stdout
    assert "3.77" in result.stdout and "16.1" in result.stdout


def test_rays_own_info_and_warning_lines_stay_out_of_its_output(tmp_path: Path) -> None:
    """Ray logs through handlers it sets up itself, so only a real process shows them."""
    command = "from rolloutlog.cli.main import main; main()"
    args = ["sweep", "--scenario", "smoke", "--steps", "1", "--engine", "ray", "--workers", "1"]
    result = subprocess.run(
        [sys.executable, "-c", command, *args, "-o", str(tmp_path / "r.parquet")],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "running 1 on ray" in " ".join(result.stderr.split())
    assert not [line for line in result.stderr.splitlines() if "INFO" in line or "WARNING" in line]
