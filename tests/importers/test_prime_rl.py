"""`import --from prime-rl` and `whatif FOLDER`, on folders that verifiers' records wrote."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.types import BatchShipped, EpisodeCompleted, EpisodeFailed, GroupOpened
from rolloutlog.importers import IMPORT_NOTE, import_prime_rl
from rolloutlog.record import read_foreign_ids
from tests.invoke import bad_input
from tests.record.clean import replay_problems


def records(folder: Path, cohort: str) -> list[dict]:
    paths = sorted(folder.glob(f"rollouts/step_*/train/{cohort}/traces.jsonl"))
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def test_the_import_keeps_the_world_facts_and_replays_clean(prime_run: Path, tmp_path: Path):
    log = tmp_path / "run.arrow"
    note = import_prime_rl(prime_run, log)
    assert replay_problems(log) == []
    events = read_log(log)
    ours = {foreign: mine for mine, foreign in read_foreign_ids(log).items()}
    completed = {e.episode_id: e for e in events if isinstance(e, EpisodeCompleted)}
    for record in records(prime_run, "all"):
        if record["ok"]:
            got = completed[ours[record["id"]]]
            rewards = [r for t in record["traces"] for r in t["rewards"].values()]
            assert got.reward == sum(r["score"] * r["weight"] for r in rewards)
            usage = [c["usage"] for t in record["traces"] for c in t["calls"]]
            assert got.completion_tokens == sum(u["completion_tokens"] for u in usage)
    shipped = [e for e in events if isinstance(e, BatchShipped)]
    for batch in shipped:
        path = prime_run / f"rollouts/step_{batch.step}/train/effective/traces.jsonl"
        trained = [json.loads(line)["id"] for line in path.read_text().splitlines()]
        assert list(batch.trained_ids) == [ours[e] for e in trained]
    assert [b.step for b in shipped] == [1, 2, 3, 4]
    assert json.loads(LogReader(log).notes(IMPORT_NOTE)[0]) == note
    assert any("late_arrival_rate" in fact for fact in note["assumed"])


def test_failures_without_a_trace_eval_and_frozen_groups_are_imported(
    prime_run: Path, tmp_path: Path
):
    log = tmp_path / "run.arrow"
    import_prime_rl(prime_run, log)
    events = read_log(log)
    ours = {foreign: mine for mine, foreign in read_foreign_ids(log).items()}
    failed = {e.episode_id for e in events if isinstance(e, EpisodeFailed)}
    traceless = [r["id"] for r in records(prime_run, "all") if not r["traces"]]
    assert traceless and {ours[e] for e in traceless} <= failed
    opened = [e for e in events if isinstance(e, GroupOpened)]
    assert {e.work for e in opened} == {"train", "eval"}
    assert sum(e.frozen for e in opened) == 1  # its records have no run.work.policy
    assert replay_problems(log) == []


def test_a_resumed_run_is_refused_naming_its_first_step(prime_run: Path, tmp_path: Path):
    (prime_run / "rollouts/step_1").rename(tmp_path / "step_1")
    (prime_run / "metrics.jsonl").write_text("")
    line = bad_input(["import", "--from", "prime-rl", str(prime_run), "-o", str(tmp_path / "x")])
    assert line == (
        f"rolloutlog: error: {prime_run / 'rollouts'}: step_2: the steps start after 1 "
        "(a resumed run): its earlier steps are not in this folder"
    )


def test_import_says_on_stderr_what_it_assumed(prime_run: Path, tmp_path: Path):
    log = tmp_path / "run.arrow"
    result = CliRunner().invoke(
        main, ["import", "--from", "prime-rl", str(prime_run), "-o", str(log)]
    )
    assert result.exit_code == 0, result.output
    assert "rolloutlog: assumed: dispatch times" in result.stderr
    assert "rolloutlog: reconstructed: rewards" in result.stderr
    assert result.stdout.startswith("imported ") and replay_problems(log) == []


def test_whatif_takes_the_folder_straight_away(prime_run: Path):
    result = CliRunner().invoke(
        main, ["whatif", str(prime_run), "--json", "--steps", "2", "--world", "replay"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["recorded"]["steps_shipped"] == 4


def test_a_folder_that_is_not_a_prime_rl_run_is_one_line(tmp_path: Path):
    line = bad_input(
        ["import", "--from", "prime-rl", str(tmp_path), "-o", str(tmp_path / "x.arrow")]
    )
    assert (
        line == f"rolloutlog: error: {tmp_path}: not a prime-rl run: no configs/orchestrator.json"
    )
    assert not (tmp_path / "x.arrow").exists()


def test_a_record_without_a_needed_field_is_named_by_file_line_and_field(prime_run: Path):
    path = prime_run / "rollouts/step_2/train/all/traces.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    del record["group"]
    path.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    line = bad_input(
        ["import", "--from", "prime-rl", str(prime_run), "-o", str(prime_run / "x.arrow")]
    )
    assert line == f"rolloutlog: error: {path}: line 2: group: missing"


def test_a_trained_id_without_its_arrival_cannot_be_mapped(prime_run: Path):
    path = prime_run / "rollouts/step_1/train/all/traces.jsonl"
    trained = {r["id"] for r in records(prime_run, "effective")}
    kept = [line for line in path.read_text().splitlines() if json.loads(line)["id"] not in trained]
    path.write_text("".join(line + "\n" for line in kept))
    line = bad_input(["whatif", str(prime_run)])
    effective = prime_run / "rollouts/step_1/train/effective/traces.jsonl"
    assert line.startswith(f"rolloutlog: error: {effective}: id: ")
    assert line.endswith("trained, but no train/all record has it")


def test_an_episode_recorded_twice_is_named_with_both_places(prime_run: Path):
    path = prime_run / "rollouts/step_3/train/all/traces.jsonl"
    first = path.read_text().splitlines()[0]
    later = prime_run / "rollouts/step_4/train/all/traces.jsonl"
    lines = later.read_text().splitlines()
    later.write_text("\n".join([*lines, first]) + "\n")
    line = bad_input(["import", "--from", "prime-rl", str(prime_run), "-o", str(prime_run / "x")])
    episode_id = json.loads(first)["id"]
    assert line == (
        f"rolloutlog: error: {later}: line {len(lines) + 1}: id: {episode_id} is also at "
        f"{path}: line 1"
    )
