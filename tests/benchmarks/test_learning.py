"""The learning study's machinery on a tiny budget: rows, resume, ranking, correlation."""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import sys
from pathlib import Path

import pytest

from rolloutlog.runtime.live.vllm_launch import VLLMStartError

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/learning.py` has it
learning = importlib.import_module("learning")
ranking = importlib.import_module("learning_report")

TINY = ("batch_size=16", "max_inflight=16", "group_size=4", "server_mode=thread")


def _row(preset: str, curve: list[float], seed: int = 0, whatif: float = 1.0) -> dict:
    return {
        "settings": "default", "preset": preset, "seed": seed, "steps": len(curve),
        "overrides": [], "curve": curve, "batch_t": [float(i + 1) for i in range(len(curve))],
        "trained_tokens": 10, "discarded": 0, "trained_ages": {"0": 1},
        "by_difficulty": {"easy": {"dispatched": 4, "trained": 2, "reward": 0.5}},
        "whatif": {"a": whatif, "b": 2 * whatif, "c": 3 * whatif},
    }  # fmt: skip


def test_the_study_runs_each_missing_run_once_and_reports_it(tmp_path):
    table = tmp_path / "runs.jsonl"
    lines: list[str] = []
    common = {
        "presets": ["per-group", "per-episode"],
        "seeds": [0, 1],
        "steps": 2,
        "settings": ["hard"],
        "table": table,
        "extra": TINY,
        "progress": lines.append,
    }
    assert learning.study(**common) == 4
    rows = learning.load_table(table)
    label = " ".join(["hard_task_share=0.2", *TINY])
    assert sorted(learning.run_key(r) for r in rows) == [
        ("twin", "hard", label, preset, seed, 2)
        for preset in ("per-episode", "per-group")
        for seed in (0, 1)
    ]
    for row in rows:
        assert row["ok"] and len(row["curve"]) == len(row["batch_t"]) == 2
        assert set(row["whatif"]) == {"per-group", "per-episode"}
        assert set(row["by_difficulty"]) == {"easy", "hard"}  # hard_task_share=0.2
        assert row["trained_tokens"] > 0 and "hard_task_share=0.2" in row["overrides"]
    # resuming runs nothing new; a part with another seed runs only that seed
    assert learning.study(**common) == 0
    assert learning.study(**{**common, "seeds": [0, 2]}) == 2
    assert len(learning.load_table(table)) == 6
    # other --set items make other runs, reported apart
    assert learning.study(**{**common, "seeds": [0], "presets": ["per-group"],
                             "extra": [*TINY, "is_correction=tis"],
                             "compare": ["per-group", "all"]}) == 1  # fmt: skip
    assert set(learning.load_table(table)[-1]["whatif"]) == {"per-group", "all"}
    text = ranking.report(learning.load_table(table), 2)
    assert f"### hard ({label})" in text and "| per-group | 3 |" in text
    assert "is_correction=tis)" in text and "| per-group | 1 |" in text and "Spearman" in text


def test_a_missing_preset_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        learning.main(["--presets", "per-group,nonesuch", "--table", str(tmp_path / "t")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("learning.py: error: --presets: policy 'nonesuch'")
    assert "\n" not in error and not (tmp_path / "t").exists()


def test_a_run_that_never_reaches_the_target_ranks_after_those_that_do():
    slow = _row("a", [0.9] * 30)  # reaches 0.8 at batch 10
    late = _row("b", [0.0] * 20 + [0.85] * 10)  # reaches it at batch 30
    never_high = _row("c", [0.7] * 30)
    never_low = _row("d", [0.1] * 30)
    assert ranking.seconds_to(slow, 0.8) == 10.0 and ranking.seconds_to(late, 0.8) == 30.0
    assert math.isinf(ranking.seconds_to(never_high, 0.8))
    order = ranking.run_order([never_low, never_high, late, slow])
    assert [r["preset"] for r in order] == ["a", "b", "c", "d"]
    assert ranking.preset_order([never_low, never_high, late, slow]) == ["a", "b", "c", "d"]


def test_the_correlation_of_learner_and_whatif_rankings_on_a_hand_made_table():
    rows = [_row("a", [0.9] * 12), _row("b", [0.0] * 2 + [0.9] * 10), _row("c", [0.1] * 12)]
    assert ranking.preset_order(rows) == ["a", "b", "c"]
    assert ranking.whatif_order(rows) == ["c", "b", "a"]  # whatif: c > b > a per hour
    assert ranking.spearman(ranking.preset_order(rows), ranking.whatif_order(rows)) == -1.0
    assert ranking.spearman(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(0.5)
    assert ranking.spearman(["a"], ["a"]) is None
    assert "Spearman -1.00" in ranking.report(rows, 12)
    json.dumps(rows)  # the rows are what the table stores


def test_the_report_shows_only_the_runs_of_its_command(tmp_path, capsys):
    def run(settings: str, overrides: list[str], steps: int = 3, seed: int = 0) -> dict:
        row = _row("per-group", [0.1] * steps, seed=seed, whatif=1.0)
        return {**row, "settings": settings, "overrides": overrides, "whatif": {"per-group": 1.0}}

    study = list(learning.SETTINGS_SETS["study"])
    table = tmp_path / "runs.jsonl"
    rows = [
        run("study", study),
        run("study", [*study, "is_correction=tis"]),  # more items: a set of its own
        run("study", study, seed=7),  # a seed the command does not name
        {**run("study", study, seed=1), "ok": False},  # stopped before its last batch
        run("study", study, steps=4),  # another length
        run("hard", ["hard_task_share=0.2", "batch_size=128"]),  # an older set
        {**run("study", study, seed=1), "backend": "vllm"},  # real vLLM: never pooled
    ]
    table.write_text("".join(json.dumps(row) + "\n" for row in rows))
    common = ["--report-only", "--presets", "per-group", "--steps", "3", "--table", str(table)]
    learning.main([*common, "--settings", "study", "--seeds", "0", "1"])
    text = capsys.readouterr().out
    label = " ".join(study)
    assert text.count("### ") == 2 and f"### study ({label})\n" in text
    assert f"### study ({label} is_correction=tis)" in text
    assert text.count("| per-group | 1 |") == 2 and "### hard" not in text
    learning.main([*common, "--settings", "study", "--seeds", "0", "--set", "is_correction=tis"])
    text = capsys.readouterr().out
    assert text.count("### ") == 1 and "is_correction=tis)" in text
    learning.main([*common, "--settings", "study", "--seeds", "0", "1", "--backend", "vllm"])
    text = capsys.readouterr().out
    assert text.count("### ") == 1 and text.count("| per-group | 1 |") == 1


def test_a_vllm_run_of_a_cell_the_twin_ran_is_a_run_of_its_own(tmp_path):
    """The table keys runs by backend too: a twin row does not stand for the vLLM run."""
    table = tmp_path / "runs.jsonl"
    ran: list[tuple[str, int]] = []

    def runner(name, preset, seed, steps, overrides, compare, variant=()):
        ran.append((preset, seed))
        row = learning._planned(name, preset, seed, steps, [], "vllm")
        return {**row, "variant": list(variant), "curve": [0.1] * steps}

    twin = learning._planned("hard", "per-group", 0, 2, [], "twin")
    table.write_text(json.dumps({**twin, "backend": "twin"}) + "\n")
    common = {"presets": ["per-group"], "seeds": [0], "steps": 2, "settings": ["hard"],
              "table": table, "runner": runner, "progress": lambda line: None}  # fmt: skip
    assert learning.study(**common) == 0 and ran == []  # the twin's run is there
    assert learning.study(**common, backend="vllm") == 1 and ran == [("per-group", 0)]
    assert learning.study(**common, backend="vllm") == 0  # resumed: nothing new
    rows = learning.load_table(table)
    assert [learning.backend_of(r) for r in rows] == ["twin", "vllm"]
    assert learning.backend_of({"settings": "hard"}) == "twin"  # rows before the field


def test_the_report_compares_rewards_at_the_wall_second_every_run_reached():
    long = {**_row("a", [0.2] * 10 + [0.9] * 20), "steps": 30}  # 30 s
    short = {**_row("b", [0.5] * 12), "steps": 30}  # 12 s: the shortest run
    text = ranking.report([long, short], 30)
    assert "| final reward | reward at 12 s |" in text
    assert "| a | 1 | 15 (15-15) | 19 (19-19) | 0.900 | 0.340 |" in text  # 8 x 0.2, 2 x 0.9
    assert "| b | 1 | 10 (10-10) | never (0/1 did) | 0.500 | 0.500 |" in text


def test_the_sweep_variants_and_the_presets_items_they_override():
    found = learning.variants([1, 4], ["drop"], ["none", "decoupled"], sync=True)
    assert found == [
        ("max_off_policy_steps=1", "stale_tokens=drop", "is_correction=none"),
        ("max_off_policy_steps=1", "stale_tokens=drop", "is_correction=decoupled"),
        ("max_off_policy_steps=4", "stale_tokens=drop", "is_correction=none"),
        ("max_off_policy_steps=4", "stale_tokens=drop", "is_correction=decoupled"),
        ("max_off_policy_steps=0", "weight_update=drain"),
    ]
    assert learning.variants([], [], [], sync=False) == [()]  # no sweep: the plain runs
    assert learning.sync_batch(64) == (*learning.SYNC, "max_inflight=64")
    assert learning.variants([2], [], [], sync=False) == [("max_off_policy_steps=2",)]
    learning.check_variants(found, ["long-gen", "study"])
    # the variant's rule wins over the preset's; eval_every is added unless named
    assert "weight_update=interrupt" in learning.preset_sets("areal")
    items = learning.run_items("areal", ["batch_size=16", *found[-1]], found[-1], 5)
    assert [i for i in items if i.startswith("weight_update=")] == ["weight_update=drain"]
    assert items[-1] == "eval_every=5"
    learning.build_settings(learning.parse_overrides(items), seed=0)  # no key twice
    assert learning.run_items("areal", ["eval_every=2"], (), 5)[-1] != "eval_every=5"


def test_a_bad_variant_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        learning.main(["--bounds", "1,x", "--table", str(tmp_path / "t")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "learning.py: error: --bounds x: a bound is a whole number of steps"
    )
    assert not (tmp_path / "t").exists()


def test_the_sweeps_smallest_budget_records_eval_diagnostics_and_cpu(tmp_path):
    """The staleness sweep on 2 batches: a bound with the decoupled correction, and the
    synchronous baseline; rows with held-out evaluations, per-step figures, CPU per batch."""
    table = tmp_path / "runs.jsonl"
    found = learning.variants([1], [], ["decoupled"], sync=True)
    ran = learning.study(presets=["per-group"], seeds=[0], steps=2, settings=["hard"],
                         table=table, extra=TINY, variant_sets=found,
                         progress=lambda line: None)  # fmt: skip
    assert ran == 2
    rows = learning.load_table(table)
    assert [tuple(r["variant"]) for r in rows] == found
    for row in rows:
        assert row["ok"] and row["eval_every"] == 5
        assert [e["step"] for e in row["eval"]] == [2]  # the last step is always scored
        assert 0.0 <= row["eval"][0]["greedy"] <= 1.0
        assert [d["step"] for d in row["diagnostics"]] == [1, 2]
        assert len(row["batch_cpu_s"]) == 2 and 0 < row["batch_cpu_s"][0] <= row["cpu_s"]
        assert 0.5 < row["trained_length_ratio"] < 2.0  # trained against completed lengths
    assert all(d["ages"] == {"0": d_sum(d)} for d in rows[1]["diagnostics"])  # synchronous
    text = ranking.sweep_report(rows, 2, 0.5)
    assert "| hard | per-group | b1 decoupled | 1 |" in text and "CPU s to target" in text
    assert "| hard | per-group | sync | 1 |" in text
    assert "| sync against bound 1 | 1 vs 1 |" in ranking.sweep_effects(rows, 2)
    assert ranking.model_report(rows, 0.5)[1] is None  # two cells test no model


def d_sum(diagnostic: dict) -> int:
    return sum(diagnostic["ages"].values())


def _scored(preset: str, greedy: list[float], train: float, variant: list[str]) -> dict:
    """A swept run of 10 batches of 64 (ages 0 and 1), evaluated every 5, 3 CPU s a batch."""
    row = _row(preset, [train] * 10)
    return {**row, "variant": variant, "trained_length_ratio": 0.9, "episodes_trained": 640,
            "eval": [{"step": 5 * (i + 1), "greedy": g, "sampled": g / 2}
                     for i, g in enumerate(greedy)],
            "batch_cpu_s": [3.0 * (i + 1) for i in range(10)], "cpu_s": 31.0, "wall_s": 12.0,
            "trained_ages": {"0": 320, "1": 320},
            "diagnostics": [{"ratio_ess": 0.9, "clip_fraction": 0.1, "kl_behaviour": 0.01,
                             "ages": {"0": 32, "1": 32}} for _ in range(10)]}  # fmt: skip


def test_the_sweep_table_ranks_by_held_out_reward_and_reads_cpu_to_the_target(tmp_path):
    bound = ["max_off_policy_steps=4", "stale_tokens=drop", "is_correction=none"]
    high_train = _scored("a", [0.2, 0.4], train=0.9, variant=bound)  # best on its own batches
    best_eval = _scored("b", [0.6, 0.7], train=0.5, variant=list(learning.SYNC))
    assert ranking.to_eval_target(best_eval, 0.5) == (5.0, 15.0)
    assert ranking.reached(best_eval, 0.5) == (5.0, 320.0, 15.0)  # 5 batches of 64
    assert ranking.to_eval_target(high_train, 0.5) == (math.inf, math.inf)
    lucky = _scored("c", [0.1, 0.45], train=0.1, variant=bound)  # one evaluation at 0.45
    assert ranking.to_eval_target(lucky, 0.3) == (math.inf, math.inf)  # their mean 0.275
    assert ranking.to_eval_target(lucky, 0.25) == (10.0, 30.0)
    assert ranking.variant_name(high_train) == "b4 drop none"
    assert ranking.variant_name(best_eval) == "sync"
    one_batch = {**best_eval, "variant": list(learning.sync_batch(64))}
    assert ranking.variant_name(one_batch) == "sync, 64 in flight"
    assert ranking.eval_at_cpu(best_eval, 29.0) == 0.6  # the step-10 evaluation is at 30 s
    text = ranking.sweep_report([high_train, best_eval], 10, 0.5)
    lines = [line for line in text.splitlines() if line.startswith("| default")]
    assert [line.split(" | ")[2] for line in lines] == ["sync", "b4 drop none"]
    assert "| 1 | 0.650 | 0.325 | 0.700 | 5 (5-5) | 320 (320-320) | 15 (15-15) | 3.10 |" in lines[0]
    assert (
        "| 0:0.50 1:0.50 | 0.50 | 0.00 (0.00) | 0.900 | 0.900 | 0.100 | 0.010 | 0.900 |" in lines[1]
    )
    ranking.plot_eval([high_train, best_eval], 10, tmp_path / "eval.png")
    assert (tmp_path / "eval.png").stat().st_size > 0


def test_a_contrast_is_resolved_only_where_its_interval_leaves_out_zero():
    delta, _, high = ranking.difference([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    # Welch: variances 1/3 each, df 4, t 2.78: 1 ± 2.78·sqrt(2/3)
    assert delta == pytest.approx(1.0) and high - delta == pytest.approx(2.78 * (2 / 3) ** 0.5)
    assert ranking.difference([1.0], [0.0, 1.0])[1:] == (-math.inf, math.inf)

    def run(bound: int, correction: str, greedy: float) -> dict:
        variant = [f"max_off_policy_steps={bound}", "stale_tokens=drop",
                   f"is_correction={correction}"]  # fmt: skip
        return _scored("p", [greedy, greedy], 0.1, variant)

    rows = [run(1, "none", g) for g in (0.30, 0.31, 0.32)]
    rows += [run(1, "decoupled", g) for g in (0.40, 0.41, 0.42)]
    rows += [run(4, "none", g) for g in (0.30, 0.35, 0.40)]  # no decoupled at bound 4
    rows += [run(4, "tis", g) for g in (0.10, 0.35, 0.60)]
    text = ranking.effects(rows, [("greedy", ranking.eval_late)])
    assert "| decoupled against none | 3 vs 3 | +0.100 (" in text  # bound 1's cells only
    assert text.split("decoupled against none")[1].split("\n")[0].endswith("resolved |")
    tis = text.split("| tis against none | 3 vs 3 | ")[1].split("\n")[0]
    assert tis.startswith("+0.000") and "resolved" not in tis
    assert "| bound 4 against bound 1 | 3 vs 3 |" in text  # the cells both ran: drop none


def test_the_learning_model_is_fitted_and_tested_leaving_one_setting_out():
    from rolloutlog.studies import learning_model as model

    truth = model.LearningModel(
        target=0.3, intercept=8.0, per_age=0.2, per_length=-1.5,
        loso_error=0.0, loso_spearman=1.0, settings=6, source="",
    )  # fmt: skip
    grid = [(0.0, 1.0), (1.0, 0.95), (2.0, 1.0), (3.0, 0.9), (4.0, 1.05), (1.5, 0.85)]
    points = [
        model.LearningPoint(mean_age=a, length_ratio=r, episodes=truth.episodes_needed(a, r))
        for a, r in grid
    ]
    fitted = model.fit(points, 0.3)
    assert (fitted.intercept, fitted.per_age, fitted.per_length) == pytest.approx((8.0, 0.2, -1.5))
    rates = [10.0, 20.0, 15.0, 30.0, 12.0, 25.0]
    measured = [p.episodes / rate for p, rate in zip(points, rates, strict=True)]
    predicted, error, rho = model.loso(points, rates, measured, 0.3)
    assert predicted == pytest.approx(measured) and error < 1e-9 and rho == pytest.approx(1.0)
    _, flat_error, _ = model.loso(points, rates, measured, 0.3, fitter=model.constant)
    assert flat_error > 0.2  # throughput alone misses the age's cost
    report = {"trained_episodes_per_hour": 3600.0, "mean_trained_age": 1.0,
              "trained_length_ratio": 0.95}  # fmt: skip
    assert fitted.seconds_to_reward(report) == pytest.approx(truth.episodes_needed(1.0, 0.95))
    assert fitted.seconds_to_reward({**report, "trained_episodes_per_hour": None}) is None
    assert model.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(model.spearman([1, 2], [1, 2]))


def test_the_model_report_reads_its_cells_from_the_sweep_rows():
    rows = []
    for bound, greedy in ((1, [0.2, 0.4]), (2, [0.25, 0.45]), (4, [0.1, 0.2])):
        variant = [f"max_off_policy_steps={bound}", "stale_tokens=drop", "is_correction=none"]
        rows += [_scored("p", greedy, 0.1, variant) for _ in range(2)]
    rows.append(_scored("p", [0.5, 0.6], 0.1, list(learning.SYNC)))
    text, fitted = ranking.model_report(rows, 0.3)
    assert "Left out (most seeds never reached it): b4 drop none (0/2)." in text
    assert "| b1 drop none | 0.50 | 0.900 | 640 | 20.6 | 30 |" in text  # 640 eps / 31 CPU s
    assert "| sync | 0.50 | 0.900 | 320 | 20.6 | 15 |" in text
    assert fitted is not None and fitted.settings == 3 and "Spearman" in text


def test_vllm_against_the_twin_is_compared_per_cell_that_ran_on_both(tmp_path, capsys):
    bound = ["max_off_policy_steps=4", "stale_tokens=drop", "is_correction=none"]
    twin = [_scored("p", [0.1, g], train=0.1, variant=bound) for g in (0.2, 0.3)]
    vllm = [{**_scored("p", [0.1, g], train=0.1, variant=bound), "backend": "vllm",
             "cpu_s": 61.0} for g in (0.3, 0.4)]  # fmt: skip
    alone = _scored("p", [0.1, 0.2], train=0.1, variant=list(learning.SYNC))  # twin only
    text = ranking.backend_effects([*twin, alone], vllm, 10)
    assert "| b4 drop none | 2, 2 | held-out greedy (last 2) | 0.175 | 0.225 | +0.050 (" in text
    cpu = "| b4 drop none | 2, 2 | CPU s / batch | 3.100 | 6.100 | +3.000 (+3.000 to +3.000) "
    assert cpu + "resolved |" in text
    assert "sync" not in text  # one backend only: nothing to compare
    table = tmp_path / "both.jsonl"
    table.write_text("".join(json.dumps(row) + "\n" for row in [*twin, alone, *vllm]))
    backends = importlib.import_module("learning_backends")
    backends.main([str(table), "--steps", "10"])
    assert capsys.readouterr().out.strip() == text.strip()
    with pytest.raises(SystemExit) as exit_:
        backends.main([str(tmp_path / "none.jsonl")])
    assert exit_.value.code == 2 and "no table at" in capsys.readouterr().err


def test_a_server_that_does_not_start_ends_the_command_in_one_line(tmp_path, capsys, monkeypatch):
    @contextlib.contextmanager
    def no_server(*args):
        raise VLLMStartError("vllm serve was not healthy within 300 s:\nlast log line")
        yield []

    monkeypatch.setattr(learning, "_backend", no_server)
    table = tmp_path / "runs.jsonl"
    table.write_text(json.dumps({**_row("per-group", [0.1]), "steps": 1}) + "\n")
    with pytest.raises(SystemExit) as exit_:
        learning.main(["--presets", "per-group", "--backend", "vllm", "--table", str(table)])
    err = capsys.readouterr().err.splitlines()
    assert exit_.value.code == 1 and err == [
        f"learning.py: error: vllm serve was not healthy within 300 s (the rows in {table} "
        "are kept)",
        "last log line",
    ]
    assert len(learning.load_table(table)) == 1
