"""The held-out evaluation: a fixed set disjoint from training, scored deterministically,
and the per-step rows a live run reports (trainer figures, trained ages, evaluations)."""

from __future__ import annotations

import pytest
import torch

from rolloutlog.core.config import parse_overrides
from rolloutlog.runs.train import run_training
from rolloutlog.runtime.live.digits import (
    EOS_ID,
    HELD_OUT_SHARE,
    held_out_tasks,
    is_held_out,
    task_from_id,
)
from rolloutlog.runtime.live.evaluation import completions, evaluate
from rolloutlog.runtime.live.model import build_model
from rolloutlog.runtime.live.settings import build_settings


@pytest.mark.parametrize("share", [0.0, 0.2, 1.0])
def test_no_training_task_is_a_held_out_task(share):
    held_out = held_out_tasks(64, share)
    assert all(is_held_out(task.digits) for task in held_out)
    assert sum(task.difficulty == "hard" for task in held_out) == round(64 * share)
    prompts = {task.digits for task in held_out}
    training = [task_from_id(f"t{number}", share) for number in range(5_000)]
    assert not any(is_held_out(task.digits) for task in training)
    assert prompts.isdisjoint(task.digits for task in training)
    # the held-out side is about HELD_OUT_SHARE of the sequences a training task could draw
    fours = [tuple(int(c) for c in f"{n:04d}") for n in range(10_000)]
    assert sum(map(is_held_out, fours)) == pytest.approx(HELD_OUT_SHARE * 10_000, rel=0.2)


def test_the_held_out_set_is_fixed():
    """A function of its size and hard share alone: no seed, no state (pinned here)."""
    tasks = held_out_tasks(8, 0.25)
    assert tasks == held_out_tasks(8, 0.25)
    assert [t.task_id for t in tasks] == [f"held-out-{i}" for i in range(8)]
    assert [t.difficulty for t in tasks] == ["hard"] * 2 + ["easy"] * 6
    assert held_out_tasks(16, 0.25)[:2] == tasks[:2]  # a larger set extends a smaller one
    assert tasks[2].digits == (8, 8, 0, 6, 4, 1)  # pinned: studies compare on these tasks


def test_a_bad_held_out_size_or_share_is_refused():
    with pytest.raises(ValueError, match="at least one task"):
        held_out_tasks(0, 0.0)
    with pytest.raises(ValueError, match="hard_share"):
        held_out_tasks(4, 1.5)


def _one_at_a_time(model, task) -> list[int]:
    """Greedy decoding of one task alone, stopped at EOS: the reference for the batches."""
    tokens = list(task.prompt_ids)
    with torch.no_grad():
        for _ in range(task.max_tokens):
            tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
            if tokens[-1] == EOS_ID:
                break
    return tokens[len(task.prompt_ids) :]


def test_greedy_scoring_is_deterministic_and_matches_decoding_each_task_alone():
    model = build_model(seed=3)
    tasks = held_out_tasks(12, 0.25)
    batched = completions(model, tasks, temperature=1.0, generator=None)
    assert batched == [_one_at_a_time(model, task) for task in tasks]
    first = evaluate(model, tasks, step=5, seed=0, temperature=1.0)
    again = evaluate(model, tasks, step=5, seed=1, temperature=1.0)  # another run seed
    assert first["greedy"] == again["greedy"]
    assert first["greedy_by_difficulty"] == again["greedy_by_difficulty"]
    assert set(first["greedy_by_difficulty"]) == {"easy", "hard"}
    # sampled: the same for the same (seed, step)
    assert evaluate(model, tasks, step=5, seed=0, temperature=1.0)["sampled"] == first["sampled"]
    assert model.training  # evaluation leaves the trainer's mode as it found it


def test_a_run_reports_each_step_with_its_ages_diagnostics_and_evaluations(tmp_path):
    items = ["batch_size=16", "max_inflight=16", "group_size=4", "server_mode=thread",
             "eval_every=2", "eval_tasks=8", "hard_task_share=0.25"]  # fmt: skip
    config, live = build_settings(parse_overrides(items), seed=0)
    report = run_training(config, live, steps=3, seed=0, log_path=tmp_path / "run.arrow")
    rows = report["train_steps"]
    assert report["finished_reason"] == "steps" and [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert sum(row["ages"].values()) == row["episodes"] > 0
        assert 0.0 < row["ratio_ess"] <= 1.0 and row["kl_behaviour"] >= 0.0
        assert {"ratio_mean", "clip_fraction", "corrected_fraction"} <= row.keys()
    assert "eval" not in rows[0]  # every second step, and the last
    assert [rows[1]["eval"]["step"], rows[2]["eval"]["step"]] == [2, 3]
    assert set(rows[2]["eval"]["sampled_by_difficulty"]) == {"easy", "hard"}
