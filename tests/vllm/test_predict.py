"""benchmarks/predict.py's vLLM probe: a short `train --backend vllm` against the session's
first server (as `--engine vllm` runs each probe), whose log the what-if fits and simulates.

The first server only: test_train.py kills the second one later in the session.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/predict.py` has it
predict = importlib.import_module("predict")

STEPS = 3


def test_a_vllm_probes_log_is_fitted_and_simulated_into_other_settings(vllm, tmp_path):
    url = vllm[0].url
    log = predict.probe_log(tmp_path, ("per-episode", 32), STEPS, 2, [url])
    report = json.loads((tmp_path / "per-episode-mi32.json").read_text())
    assert report["finished_reason"] == "steps" and report["error"] is None
    assert report["steps_shipped"] == STEPS and report["episodes_failed"] == 0
    (endpoint,) = report["endpoints"]
    assert endpoint["url"] == url and endpoint["alive"] and endpoint["generations"] > 0
    assert (tmp_path / "per-episode-mi32.arrow.weights").is_dir()  # the broadcast vLLM read

    settings = [("per-episode", 32), ("per-episode", 64), ("all", 32)]
    predicted = predict.predict(log, settings, 0)
    assert list(predicted) == settings
    for got in predicted.values():
        assert got["trained_per_s"] > 0 and math.isfinite(got["latency_p50_s"]), got
    _, recorded, _ = predict.fit_recorded(log, 0)
    live = predict.figures(recorded, log)
    # the re-run of the probe's own setting: the fit scales the servers to the log's rate
    assert predict.error("trained_per_s", predicted[settings[0]]["trained_per_s"], live) < 0.25
