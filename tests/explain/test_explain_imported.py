"""`explain` on runs imported from other stacks: what the import knows, and a line naming
what it cannot."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.record import Recorder
from tests.importers.areal_run import RUN, write_run


def test_an_areal_folder_is_imported_and_says_it_ships_no_batch(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "areal", RUN)
    result = CliRunner().invoke(main, ["explain", str(folder)])
    assert result.exit_code == 0, result.output
    assert "no batch shipped: the trainer never started" in result.stdout
    assert "imported from areal: every cause: the import ships no batch" in result.stderr
    # the counterfactuals take the folder too (whatif's world is fitted from its import)
    without = CliRunner().invoke(main, ["explain", str(folder), "--without", "failures"])
    assert without.exit_code == 0, without.output


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
