"""Flags mean one thing: an output's format is its suffix (or refused, naming the formats),
a single-value option given twice and `+RULE` parts that contradict each other are refused,
each in one line, instead of one of them silently winning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli_log import EXAMPLE
from tests.invoke import one_line_error, run

SIMULATED = EXAMPLE.with_name("simulated.arrow")
SMOKE = ("--scenario", "smoke", "--steps", "2")


@pytest.mark.parametrize(
    ("name", "opens"),
    [("m.parquet", b"PAR1"), ("m.csv", b'"step"'), ("m.jsonl", b'{"step"'), ("m.CSV", b'"step"')],
)
def test_metrics_writes_the_format_its_suffix_names(
    tmp_path: Path, name: str, opens: bytes
) -> None:
    """`metrics -o x.parquet` wrote CSV."""
    result = run("metrics", str(SIMULATED), "-o", str(tmp_path / name))
    assert result.exit_code == 0, result.output
    assert (tmp_path / name).read_bytes().startswith(opens)


def test_export_writes_the_format_its_suffix_names(tmp_path: Path) -> None:
    """`export -o x.json` wrote JSON Lines under a name that says JSON (chrome-trace)."""
    for name in ("e.jsonl", "e.json"):
        result = run("export", str(SIMULATED), "-o", str(tmp_path / name))
        assert result.exit_code == 0, result.output
    lines = (tmp_path / "e.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "run_started"
    assert json.loads((tmp_path / "e.json").read_text())["traceEvents"]


def test_metrics_on_stdout_is_csv_unless_told(tmp_path: Path) -> None:
    assert run("metrics", str(SIMULATED)).stdout.startswith('"step"')
    first = run("metrics", str(SIMULATED), "--format", "jsonl").stdout.splitlines()[0]
    assert json.loads(first)["step"] == 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["metrics", str(SIMULATED), "-o", "m.txt"], "suffix: .csv, .parquet or .jsonl"),
        (
            ["metrics", str(SIMULATED), "-o", "m.csv", "--format", "parquet"],
            "--format parquet and -o m.csv name different formats",
        ),
        (["timeline", str(SIMULATED), "-o", "t.png"], "an HTML page: name it NAME.html"),
        (["export", str(SIMULATED), "-o", "e.txt"], "suffix: .jsonl or .json (chrome-trace)"),
        (
            ["export", str(SIMULATED), "-o", "e.json", "--format", "jsonl"],
            "--format jsonl and -o e.json name different formats",
        ),
        (["whatif", str(SIMULATED), "--save-world", "w.json"], "format by its suffix: .toml"),
        (["simulate", *SMOKE, "--log", "r.jsonl"], "a log is an Arrow stream, not .jsonl"),
        (["train", "--steps", "1", "--log", "r.json"], "--log r.json: a log is an Arrow stream"),
        (
            ["import", str(EXAMPLE.with_suffix(".jsonl")), "-o", "r.parquet"],
            "a log is an Arrow stream, not .parquet: name it NAME.arrow",
        ),
        (["sweep", *SMOKE, "-o", "r.csv"], "Parquet: name it NAME.parquet"),
        (["simulate", "--scenario", "smoke", "--scenario", "default"], "--scenario given more"),
        (["simulate", *SMOKE, "--steps=3"], "--steps given more than once"),
        (["whatif", str(SIMULATED), "--seed", "1", "--seed", "2"], "--seed given more"),
        (["train", "--steps", "1", "--steps", "2"], "--steps given more than once"),
        (
            ["simulate", *SMOKE, "--policy", "per-episode+drain+interrupt"],
            "rules 'drain' and 'interrupt' contradict each other (weight_update",
        ),
        (
            ["simulate", *SMOKE, "--compare", "per-group,per-group+interrupt+drain"],
            "rules 'interrupt' and 'drain' contradict each other",
        ),
        (
            ["train", "--policy", "per-episode+drain+interrupt"],
            "rules 'drain' and 'interrupt' contradict",
        ),
    ],
)
def test_an_ambiguous_flag_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert words in one_line_error(run(*args))
    assert list(tmp_path.iterdir()) == []  # nothing written
