"""benchmarks/predict.py's arithmetic (the rank correlation, the errors, the target sets, the
latencies and episodes in flight) and its --engine handling (no vLLM environment, a folder
of the other engine's probes, the vLLM probe's command)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodesCancelled,
    GroupOpened,
    VersionPending,
)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/predict.py` has it
predict = importlib.import_module("predict")


def test_spearman_is_one_for_the_same_order_and_minus_one_reversed() -> None:
    assert predict.spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 45.0]) == pytest.approx(1.0)
    assert predict.spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert predict.spearman([1.0, 1.0, 2.0], [5.0, 5.0, 9.0]) == pytest.approx(1.0)


def test_errors_are_relative_idle_in_points_and_drops_against_a_floor() -> None:
    live = {"trained_per_s": 100.0, "trainer_idle": 0.10, "stale_drops": 3.0, "dispatched": 1000}
    assert predict.error("trained_per_s", 85.0, live) == pytest.approx(0.15)
    assert predict.error("trainer_idle", 0.25, live) == pytest.approx(0.15)
    assert predict.error("stale_drops", 6.0, live) == pytest.approx(0.3)  # 3 of a floor of 10


def test_cross_targets_are_the_probes_row_and_column() -> None:
    grid = [(p, m) for p in ("a", "b", "c") for m in (32, 64)]
    cross = predict.targets(grid, ("b", 32), "cross")
    assert sorted(cross) == [("a", 32), ("b", 32), ("b", 64), ("c", 32)]
    assert predict.targets(grid, ("b", 32), "all") == grid


def test_summary_splits_reproduction_same_preset_and_other_preset() -> None:
    grid = [(p, m) for p in ("a", "b") for m in (32, 64)]
    live = {
        s: {"trained_per_s": 10.0 * (i + 1), "latency_p50_s": 1.0, "trainer_idle": 0.1,
            "stale_drops": 100.0, "mean_trained_age": 1.0, "dispatched": 1000.0}
        for i, s in enumerate(grid)
    }  # fmt: skip
    predicted = {s: {t: dict(live[t]) for t in grid} for s in grid}
    predicted[("a", 32)][("b", 32)]["trained_per_s"] *= 1.2  # other preset, 20% off
    summary = predict.summarize(live, predicted, ["a", "b"], [32, 64])
    errors = summary["median_abs_error"]
    assert errors["reproduce"]["trained_per_s"] == 0.0 and errors["same"]["trained_per_s"] == 0
    assert errors["other"]["trained_per_s"] == 0.0  # the median of 8, one of them 0.2
    assert summary["rank_correlation"]["a-mi32"][32] == pytest.approx(1.0)


def test_vllm_without_its_environment_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROLLOUTLOG_VLLM_VENV", str(tmp_path / "no-venv"))
    with pytest.raises(SystemExit) as stopped:
        predict.main(["--engine", "vllm", "--out", str(tmp_path / "out"), "--presets", "all"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("predict.py: error: no vLLM environment at ") and "no-venv" in line
    assert not (tmp_path / "out" / "vllm").exists()  # nothing was started


def test_a_folder_of_twin_probes_is_not_reused_as_vllm_probes(tmp_path, capsys):
    (tmp_path / "per-episode-mi32.json").write_text("{}")  # a twin probe, before --engine
    with pytest.raises(SystemExit) as stopped:
        predict.main(["--engine", "vllm", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "holds probes of --engine twin, not vllm" in capsys.readouterr().err
    predict.check_engine(tmp_path, "twin")  # the twin's own folder is fine, and marked
    assert (tmp_path / "engine").read_text() == "twin\n"


def test_a_vllm_probe_names_its_servers_and_an_absolute_broadcast_folder(tmp_path, monkeypatch):
    commands: list[list[str]] = []

    def ran(command, **_):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="{}", stderr="")

    monkeypatch.setattr(predict.subprocess, "run", ran)
    monkeypatch.chdir(tmp_path)
    for folder in ("out", "twin"):
        Path(folder).mkdir()
    urls = ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    predict.probe_log(Path("out"), ("all", 64), 3, 2, urls)
    predict.probe_log(Path("twin"), ("all", 64), 3, 2)
    vllm, twin = commands
    assert vllm[vllm.index("--backend") + 1] == "vllm" and "--backend" not in twin
    assert [vllm[i + 1] for i, part in enumerate(vllm) if part == "--url"] == urls
    assert vllm[vllm.index("--weights-dir") + 1] == str(tmp_path / "out" / "all-mi64.arrow.weights")


def test_latencies_and_the_episodes_in_flight_are_counted_as_littles_law_has_them() -> None:
    """Two episodes complete after 1 s and 3 s, a third is cancelled at 2 s: the mean
    latency of the completed ones, and (1 + 3 + 2) episode-seconds over a 4 s run."""
    opened = GroupOpened(t=0.0, group_id="g", work="train", env="train", task_id="t",
                         group_size=3, policy_version=0, step=0, frozen=False)  # fmt: skip
    events = [
        opened,
        *(
            EpisodeDispatched(t=0.0, episode_id=f"g/{m}", group_id="g", member=m, policy_version=0)
            for m in range(3)
        ),
        EpisodeCompleted(t=1.0, episode_id="g/0", reward=1.0, prompt_tokens=5, completion_tokens=3),
        EpisodesCancelled(t=2.0, group_id="g", episode_ids=("g/2",), unscheduled=0, reason="stale"),
        EpisodeCompleted(t=3.0, episode_id="g/1", reward=0.0, prompt_tokens=5, completion_tokens=3),
        VersionPending(t=4.0, version=1),
    ]
    assert predict.latencies(events) == [1.0, 3.0]
    assert predict.inflight_mean(events) == pytest.approx((1.0 + 3.0 + 2.0) / 4.0)


def test_rows_written_before_a_figure_existed_are_summarized_without_it() -> None:
    live = {("a", 32): {"trained_per_s": 10.0, "trainer_idle": 0.1, "dispatched": 100.0}}
    predicted = {("a", 32): {("a", 32): {"trained_per_s": 11.0, "trainer_idle": 0.1}}}
    errors = predict.summarize(live, predicted, ["a"], [32])["median_abs_error"]["reproduce"]
    assert errors["trained_per_s"] == pytest.approx(0.1) and errors["latency_mean_s"] is None


def test_the_floor_holds_a_repeat_of_each_setting_against_it() -> None:
    """Set B's live probes as the predictions of set A's: the error of each setting's
    repeat, and per max_inflight the ranks of the two sets across presets."""
    grid = [(p, m) for p in ("a", "b", "c") for m in (32, 64)]
    live = {s: {"trained_per_s": 10.0 * (i + 1), "dispatched": 100.0} for i, s in enumerate(grid)}
    repeat = {s: dict(row) for s, row in live.items()}
    repeat[("a", 32)]["trained_per_s"] = 100.0  # 10x: now above b and c at 32
    got = predict.floor(live, repeat, ["a", "b", "c"], [32, 64])
    assert got["settings"] == 6 and got["median_abs_error"]["trained_per_s"] == 0.0
    assert got["median_abs_error"]["latency_p50_s"] is None  # no probe has the figure
    assert got["rank_correlation"][64] == pytest.approx(1.0)
    assert got["rank_correlation"][32] == pytest.approx(-0.5)


def test_references_run_first_after_every_two_settings_and_last() -> None:
    grid = [("a", 32), ("a", 64), ("b", 32)]
    names = [name for name, _ in predict.probe_sequence(grid, ("r", 64))]
    assert names == ["reference-01", "a-mi32", "a-mi64", "reference-02", "b-mi32", "reference-03"]
    assert all(s == ("r", 64) for n, s in predict.probe_sequence(grid, ("r", 64)) if "ref" in n)
    assert predict.probe_sequence(grid, None) == [(predict.probe_name(s), s) for s in grid]


def test_each_probe_gets_the_references_speed_at_its_moment(tmp_path, monkeypatch, capsys):
    """References at 100/s (t 0-10) and 300/s (t 40-50), median 200: a probe midway between
    them ran at speed 1, one after the last at 1.5; the command prints the least and most."""
    spans = [("reference-01", 0, 10, 100.0), ("x", 20, 30, None), ("reference-02", 40, 50, 300.0),
             ("y", 60, 70, None)]  # fmt: skip
    with (tmp_path / predict.CLOCK).open("w") as clock:
        for name, began, ended, _ in spans:
            clock.write(f'{{"name": "{name}", "began": {began}, "ended": {ended}}}\n')
    rates = {name: rate for name, _, _, rate in spans}
    monkeypatch.setattr(predict, "reference_rate", lambda log: rates[log.stem])
    assert predict.machine_speed(tmp_path) == {"x": pytest.approx(1.0), "y": pytest.approx(1.5)}
    assert predict.machine_speed(tmp_path / "none") == {}
    predict.print_speed(predict.machine_speed(tmp_path))
    assert "1.00 (x) to 1.50 (y)" in capsys.readouterr().out


def test_cross_errors_split_by_whether_whatif_warned_of_the_target() -> None:
    """Two cross predictions, one warned of (ran below the log's range) and 50% off, the
    other in range and exact: each lands in its own group, both in "all"."""
    grid = [("a", 32), ("b", 32)]
    live = {s: {"trained_per_s": 100.0, "dispatched": 100.0} for s in grid}
    predicted = {
        ("a", 32): {("b", 32): {"trained_per_s": 150.0, "warned": 1.0}},
        ("b", 32): {("a", 32): {"trained_per_s": 100.0, "warned": 0.0}},
    }
    errors = predict.summarize(live, predicted, ["a", "b"], [32])["median_abs_error"]
    assert errors["all, warned"]["trained_per_s"] == pytest.approx(0.5)
    assert errors["all, in range"]["trained_per_s"] == 0.0
    assert errors["all"]["trained_per_s"] == pytest.approx(0.25)
