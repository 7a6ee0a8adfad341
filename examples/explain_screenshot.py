"""docs/explain.md's picture: seconds 600 to 1000 of the slow-update run's timeline, with
the band of why the trainer waited under its row.

.venv/bin/python examples/explain_screenshot.py      # writes docs/img/explain.png
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from timeline_screenshot import ROOT, shoot  # this folder's script: run from anywhere

from rolloutlog.replay.timeline_page import Window
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "su.arrow"  # as `simulate --scenario slow-update --steps 20`
        run_policy(load_scenario("slow-update").with_steps(20), log_path=log)
        window = Window(t_from=600.0, t_to=1000.0)
        shoot(log, window, "su.arrow", ROOT / "docs/img/explain.png")


if __name__ == "__main__":
    main()
