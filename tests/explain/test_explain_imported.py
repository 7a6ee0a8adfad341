"""`explain` on runs imported from other stacks: what the import knows, and a line naming
what it cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.record import Recorder
from tests.importers.areal_run import RUN, write_run

DATA = Path(__file__).resolve().parents[1] / "data"


def test_an_areal_folder_is_imported_and_says_it_ships_no_batch(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "areal", RUN)
    result = CliRunner().invoke(main, ["explain", str(folder)])
    assert result.exit_code == 0, result.output
    assert "no batch shipped: the trainer never started" in result.stdout
    assert "without config.yaml no batch ships" in result.stderr
    # the counterfactuals take the folder too (whatif's world is fitted from its import)
    without = CliRunner().invoke(main, ["explain", str(folder), "--without", "failures"])
    assert without.exit_code == 0, without.output


def assert_waits_add_up(report: dict[str, Any], steps: int) -> None:
    """Every step's causes are the trainer's wait before it, none negative."""
    assert [row["step"] for row in report["steps"]] == list(range(1, steps + 1))
    for row in report["steps"]:
        causes = [v for k, v in row.items() if k.startswith("wait/") and k != "wait/trainer"]
        assert min(causes) >= 0.0
        assert sum(causes) == pytest.approx(row["wait/trainer"], abs=1e-9)


def test_a_folder_areal_wrote_is_split_on_its_reconstructed_batches() -> None:
    """AReaL's own run (tests/data/areal-runs, written by scripts/areal-run): four batches,
    each wait split, and the reconstruction said."""
    result = CliRunner().invoke(main, ["explain", str(DATA / "areal-runs" / "pr-1350"), "--json"])
    assert result.exit_code == 0, result.output
    assert_waits_add_up(json.loads(result.stdout), 4)
    for cause in ("pause", "every cause"):
        assert f"imported from areal: {cause}: " in result.stderr


def test_a_folder_prime_rl_wrote_charges_its_sweeps_to_refilling() -> None:
    """prime-rl 559b447's own run (tests/data/prime-rl-559b447): six batches, and the steps
    whose groups prime-rl's sweep voided are the ones that refill after thrown-away work."""
    folder = DATA / "prime-rl-559b447"
    result = CliRunner().invoke(main, ["explain", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert_waits_add_up(report, 6)
    wasted = {row["step"] for row in report["steps"] if row["wasted/episodes"]}
    redone = {row["step"] for row in report["steps"] if row["wait/redo"] > 0}
    assert redone and redone <= wasted
    for cause in ("pause", "gate", "wasted"):
        assert f"imported from prime-rl: {cause}: " in result.stderr


def test_a_prime_rl_import_names_the_causes_its_records_cannot_show(tmp_path: Path) -> None:
    # The import's note as prime-rl's importer writes it (importing a real folder needs
    # verifiers' environment: tests/importers/conftest.py); the batch and its versions
    # come as the importer records them, pending and live at the ship.
    log = tmp_path / "imported.arrow"
    note = {"source": "prime-rl", "reconstructed": [], "assumed": []}
    notes = {"import": json.dumps(note)}
    config = {"group_size": 1, "batch_size": 1}
    with Recorder(log, config=config, code_version="tests", notes=notes) as rec:
        rec.open_group(0.0, "task", env="main", task="t1")
        rec.dispatch(0.0, "task", "e1")
        rec.complete(2.0, "e1", reward=1.0, prompt_tokens=4, completion_tokens=8)
        rec.score(2.0, "task", {"e1": 0.0}, admitted=True)
        rec.ship(3.0, ["e1"])
        rec.version_pending(3.0, 1)
        rec.version_live(3.0, 1)
    result = CliRunner().invoke(main, ["explain", str(log), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["steps"][0]["wait/trainer"] == 3.0
    for cause in ("pause", "gate", "wasted"):
        assert f"imported from prime-rl: {cause}: " in result.stderr
