"""`rolloutlog explain` and the wait columns of `rolloutlog metrics`, on a known world."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rolloutlog.core.config import RunConfig
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.types import RunStarted
from tests.explain.tiny_world import TinyWorld
from tests.invoke import run


def _paused_log(tmp_path: Path) -> Path:
    """Every rollout 1 s, every update 2.5 s (the known answer's world): six batches
    ship, the trainer starts four before the log ends."""
    config = RunConfig(group_size=2, batch_size=4, max_inflight=8)
    world = TinyWorld(config, lambda episode_id: 1.0, train_s=1.0, update_s=lambda step: 2.5)
    log = tmp_path / "paused.arrow"
    write_log(log, world.run(6))
    return log


def test_explain_prints_the_table_and_the_share_of_each_cause(tmp_path: Path) -> None:
    result = run("explain", str(_paused_log(tmp_path)))
    assert result.exit_code == 0, result.output
    assert "the trainer waited 8.50 s before its 4 batches" in result.output
    assert "88% is the weight update; 12% is waiting for fresh rollouts" in result.output
    assert "never held: hold, held, straggler, gate, redo, failed" in result.output


def test_explain_json_has_every_cause_per_step_and_for_the_run(tmp_path: Path) -> None:
    result = run("explain", str(_paused_log(tmp_path)), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert [s["wait/pause"] for s in found["steps"]] == [0.0, 2.5, 2.5, 2.5]
    assert found["run"]["wait/trainer"] == 8.5
    assert found["run"]["share"]["pause"] == 7.5 / 8.5


def test_metrics_carries_the_same_wait_columns(tmp_path: Path) -> None:
    log = str(_paused_log(tmp_path))
    rows = list(csv.DictReader(io.StringIO(run("metrics", log).stdout)))
    steps = json.loads(run("explain", log, "--json").output)["steps"]
    started, unstarted = rows[: len(steps)], rows[len(steps) :]
    assert [float(r["wait/pause"]) for r in started] == [s["wait/pause"] for s in steps]
    assert [float(r["wait/trainer"]) for r in started] == [s["wait/trainer"] for s in steps]
    # shipped, never started before the log ends: no wait yet
    assert [r["step"] for r in unstarted] == ["5", "6"]
    assert {r["wait/trainer"] for r in unstarted} == {""}


def test_a_config_that_cannot_load_is_one_line_naming_the_seq(tmp_path: Path) -> None:
    log = tmp_path / "bad.arrow"
    config = {"group_size": 0}
    write_log(log, [RunStarted(t=0.0, config=config, seed=0, schema_version=3, code_version="x")])
    result = run("explain", str(log))
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        f"rolloutlog: error: {log}: seq 0 (run_started): "
        "run_started.config.group_size: must be >= 1 (got 0)"
    )


def _straggler_log(tmp_path: Path) -> Path:
    """The straggler world of the known answers: g7/1 holds batch 7 for 4.0 s."""
    config = RunConfig(group_size=2, batch_size=2, max_inflight=2)

    def duration(episode_id: str) -> float:
        group = int(episode_id[1:].partition("/")[0])
        return 5.0 if episode_id == "g7/1" else 6.0 if group > 7 else 1.0

    log = tmp_path / "straggler.arrow"
    write_log(log, TinyWorld(config, duration).run(8))
    return log


def test_step_names_the_straggler_its_batch_waited_for(tmp_path: Path) -> None:
    result = run("explain", str(_straggler_log(tmp_path)), "--step", "7")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "step 7: shipped at 11.00 s; the trainer waited 4.50 s for it, from 6.50 s to 11.00 s"
    )
    assert lines[1].split() == [
        "6.50–7.00",
        "fill",
        "queue",
        "0/2;",
        "0",
        "dropped,",
        "0",
        "failed",
        "this",
        "step;",
        "2",
        "in",
        "flight",
    ]
    assert lines[2].split() == [
        "7.00–11.00",
        "straggler",
        "queue",
        "0/2;",
        "waiting",
        "for",
        "g7/1",
    ]


def test_episode_tells_the_straggler_s_life(tmp_path: Path) -> None:
    result = run("explain", str(_straggler_log(tmp_path)), "--episode", "g7/1", "--json")
    assert result.exit_code == 0, result.output
    story = [line.split(maxsplit=1)[1] for line in json.loads(result.output)["story"]]
    # g6's arrivals at t=6 free both permits before the sink ships batch 6: g7 opens and
    # goes out at step 6, v5; its straggler is back at 11 and trains in batch 7 at age 1
    assert story == [
        "group g7 opened at step 6, v5 (train, task " + story[0].split("task ")[1],
        "dispatched at step 6, stamped v5 (permits 2/2 with it)",
        "completed after 5.00 s: reward 1.0, 30 tokens",
        "scored: advantage 0.5; queued behind 1 episodes",
        "trained in batch 7 after 0.00 s queued: dispatched at v5, (7 − 1) − 5 = 1 ≤ bound 8",
    ]


def test_a_stale_drop_is_told_with_its_rule(tmp_path: Path) -> None:
    # Bound 0, two permits, one group a batch: g2/0 goes out at v0 when g1/0 is back, batch
    # 1 ships, and at step 2 the sink drops it: (2 − 1) − 0 = 1 > bound 0.
    config = RunConfig(group_size=2, batch_size=2, max_inflight=2, max_off_policy_steps=0)
    world = TinyWorld(config, lambda episode_id: 1.0, train_s=10.0, update_s=lambda step: 0.5)
    log = tmp_path / "stale.arrow"
    write_log(log, world.run(3))
    result = run("explain", str(log), "--step", "2")
    assert result.exit_code == 0, result.output
    assert (
        "2 members of g2 (g2/0 … g2/1) dropped (stale) at step 2: dispatched at v0, "
        "(2 − 1) − 0 = 1 > bound 0" in result.output
    )


def test_step_and_episode_refuse_what_the_log_does_not_have(tmp_path: Path) -> None:
    log = str(_straggler_log(tmp_path))
    for args, problem in (
        (("--step", "99"), "step 99: the trainer never started it (steps started: 1–8)"),
        (("--episode", "g99/0"), "episode g99/0: never dispatched in this log"),
        (
            ("--step", "1", "--episode", "g1/0"),
            "--step, --episode and --without each answer one question",
        ),
    ):
        result = run("explain", log, *args)
        assert result.exit_code == 2, result.output
        assert problem in result.output
