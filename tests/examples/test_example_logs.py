"""The logs shipped under examples/ stay readable and, for the simulated one, re-derivable.

If a change to the deciders makes `examples/simulated.arrow` diverge, regenerate it with
`rolloutlog simulate --scenario smoke --set inference=independent --log
examples/simulated.arrow` (the world it was recorded in) and say why in the
commit: a recorded log that no longer verifies is a behaviour change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_simulated_example_verifies_and_replays_clean():
    runner = CliRunner()
    verified = runner.invoke(main, ["verify", str(EXAMPLES / "simulated.arrow")])
    assert verified.exit_code == 0, verified.output
    replayed = runner.invoke(main, ["replay", "--json", str(EXAMPLES / "simulated.arrow")])
    assert replayed.exit_code == 0, replayed.output
    assert '"invariant_violations": []' in replayed.output


def test_the_hand_written_example_replays_clean():
    """Written through the recording API as another orchestrator would: it folds and
    checks clean, although today's deciders would have picked other task ids."""
    replayed = CliRunner().invoke(main, ["replay", "--json", str(EXAMPLES / "small.arrow")])
    assert replayed.exit_code == 0, replayed.output
    assert '"invariant_violations": []' in replayed.output


def test_the_example_scripts_take_help_and_rewrite_nothing(tmp_path):
    """`examples/make_small_log.py --help` rewrote the committed examples."""
    before = {p.name: p.read_bytes() for p in EXAMPLES.iterdir() if p.is_file()}
    for script in sorted(EXAMPLES.glob("*.py")):
        shown = subprocess.run(
            [sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=tmp_path
        )
        assert shown.returncode == 0 and "usage:" in shown.stdout, (script, shown.stderr)
    assert {p.name: p.read_bytes() for p in EXAMPLES.iterdir() if p.is_file()} == before
