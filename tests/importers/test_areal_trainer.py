"""The trainer side of `import --from areal`, against what AReaL's own code did.

`scripts/areal-run` wrote, beside each run folder, `{run}.steps.jsonl`: what AReaL's
`prepare_batch` returned at each step (each group's sequence lengths) and when the trainer
set each version; AReaL writes neither, so the import reconstructs both. Here the batches
the import ships are checked against what `prepare_batch` returned, and the trained ages
against those that AReaL's own per-sample versions give (PR #1350's `version_rle`, read
from the dump files here, not through the importer).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.types import BatchShipped, EpisodeDispatched, VersionPending
from rolloutlog.importers import IMPORT_NOTE, import_areal
from rolloutlog.record import read_foreign_ids
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from tests.importers.test_areal_written import DATA, RUNS, TRIAL, sessions_of
from tests.invoke import bad_input


def dump_rows(run: Path) -> list[dict]:
    """Every train sample AReaL dumped, with its task."""
    rows = []
    for path in sorted((run / TRIAL / "rollout").rglob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def prepared_batches(name: str) -> list[set[int]]:
    """The tasks of each step as AReaL's prepare_batch returned them (by their samples'
    sequence lengths, which tell this run's tasks apart)."""
    rows = dump_rows(DATA / name)
    task_of = {}
    for task in {r["task_id"] for r in rows}:
        lengths = tuple(sorted(r["seqlen"] for r in rows if r["task_id"] == task))
        assert lengths not in task_of, "two tasks with the same lengths: cannot tell them apart"
        task_of[lengths] = task
    steps = (DATA / f"{name}.steps.jsonl").read_text().splitlines()
    return [{task_of[tuple(g)] for g in json.loads(line)["seqlens"]} for line in steps]


def imported(name: str, tmp_path: Path) -> tuple[list, dict[str, str]]:
    log = tmp_path / "run.arrow"
    import_areal(DATA / name, log)
    return read_log(log), read_foreign_ids(log)


@pytest.mark.parametrize("name", RUNS)
def test_each_step_ships_the_tasks_prepare_batch_returned(name: str, tmp_path: Path) -> None:
    events, theirs = imported(name, tmp_path)
    shipped = [
        {int(theirs[e].partition("/")[0]) for e in event.episode_ids}
        for event in events
        if isinstance(event, BatchShipped)
    ]
    assert shipped == prepared_batches(name)
    assert [e.version for e in events if isinstance(e, VersionPending)] == [1, 2, 3, 4]


def test_trained_ages_are_those_of_arealss_own_per_sample_versions(tmp_path: Path) -> None:
    """PR #1350: each trained sample's age is (step - 1) - its head_version, and each of its
    tokens' (step - 1) - the version in its version_rle run."""
    rows = dump_rows(DATA / "pr-1350")
    ages: Counter[int] = Counter()
    token_ages: Counter[int] = Counter()
    for step, tasks in enumerate(prepared_batches("pr-1350"), start=1):
        for row in (r for r in rows if r["task_id"] in tasks):
            ages[step - 1 - row["head_version"]] += 1
            for version, tokens in row["version_rle"]:
                token_ages[step - 1 - version] += tokens
    assert len(ages) > 1 and len(token_ages) > 1  # the run has stale samples to get right
    log = tmp_path / "run.arrow"
    import_areal(DATA / "pr-1350", log)
    summary = replay_log(open_log(log)).summary
    assert summary["trained_age_histogram"] == {str(a): ages[a] for a in sorted(ages)}
    assert summary["trained_token_age_histogram"] == {
        str(a): token_ages[a] for a in sorted(token_ages)
    }
    assert summary["invariant_violations"] == []


def test_each_dispatch_is_stamped_with_its_samples_first_version(tmp_path: Path) -> None:
    events, theirs = imported("pr-1350", tmp_path)
    stamps: dict[str, Counter[int]] = {}
    for event in events:
        if isinstance(event, EpisodeDispatched):
            task = theirs[event.episode_id].rpartition("/")[0]
            stamps.setdefault(task, Counter())[event.policy_version] += 1
    heads: dict[str, Counter[int]] = {}
    for row in dump_rows(DATA / "pr-1350"):
        heads.setdefault(str(row["task_id"]), Counter())[row["head_version"]] += 1
    assert {v for c in heads.values() for v in c} == {0, 1, 2}
    for task, versions in heads.items():
        assert not versions - stamps[task], task  # each sample's head is a member's stamp


def test_without_version_rle_no_trained_age_is_below_what_the_tasks_tail_allows(
    tmp_path: Path,
) -> None:
    """AReaL 1.0.4's tail_version is its task's newest token: no sample of the task is
    younger, so its age at step s is at least (s - 1) - tail_version."""
    events, theirs = imported("areal-1.0.4", tmp_path)
    tails = {str(r["task_id"]): r["tail_version"] for r in dump_rows(DATA / "areal-1.0.4")}
    stamp = {e.episode_id: e.policy_version for e in events if isinstance(e, EpisodeDispatched)}
    checked = 0
    for batch in (e for e in events if isinstance(e, BatchShipped)):
        for episode in batch.trained_ids:
            task = theirs[episode].rpartition("/")[0]
            assert batch.step - 1 - stamp[episode] >= batch.step - 1 - tails[task], episode
            checked += 1
    assert checked == 31


@pytest.mark.parametrize("name", RUNS)
def test_a_version_is_announced_after_its_batch_and_no_later_than_the_trainer_set_it(
    name: str, tmp_path: Path
) -> None:
    """The import's version times against the trainer's own (`updated`): never after, and
    each after its batch shipped."""
    events, _ = imported(name, tmp_path)
    origin = min(r["submit_ts"] for r in sessions_of(DATA / name, "rollout"))
    updated = [
        json.loads(line)["updated"] - origin
        for line in (DATA / f"{name}.steps.jsonl").read_text().splitlines()
    ]
    announced = [e.t for e in events if isinstance(e, VersionPending)]
    shipped = [e.t for e in events if isinstance(e, BatchShipped)]
    assert all(s <= a for s, a in zip(shipped, announced, strict=True))
    # just before a submission, which follows the trainer's resume by a few milliseconds
    assert all(a <= u + 0.05 for a, u in zip(announced, updated, strict=True))


def test_the_reconstruction_is_said_on_stderr_and_in_the_note(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    args = ["import", "--from", "areal", str(DATA / "pr-1350"), "-o", str(log)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "rolloutlog: assumed: batches: which results trained" in result.stderr
    assert "rolloutlog: assumed: versions: each step's version" in result.stderr
    note = json.loads(LogReader(log).notes(IMPORT_NOTE)[0])
    assert note["steps"] == [
        {"step": s, "tasks": sorted(tasks)}
        for s, tasks in enumerate(prepared_batches("pr-1350"), start=1)
    ]


def test_replay_checks_arealss_admission_budget_on_the_import(tmp_path: Path) -> None:
    """The import keeps the areal preset's budget; the run AReaL made holds it, and the
    same run read with a tighter max_head_offpolicyness does not."""
    log = tmp_path / "run.arrow"
    note = import_areal(DATA / "pr-1350", log)
    assert replay_log(open_log(log)).violations == []
    assert note["unchecked"].startswith("not checked: AReaL writes none of its decisions")
    tight = tmp_path / "tight"
    shutil.copytree(DATA / "pr-1350", tight)
    config = tight / TRIAL / "config.yaml"
    text = config.read_text()
    assert "  max_head_offpolicyness: 2\n" in text
    config.write_text(
        text.replace("  max_head_offpolicyness: 2\n", "  max_head_offpolicyness: 0\n")
    )
    import_areal(tight, tmp_path / "tight.arrow")
    violations = replay_log(open_log(tmp_path / "tight.arrow")).violations
    assert violations and all("areal admission" in v for v in violations)


def test_verify_says_what_the_areal_import_could_not_check(tmp_path: Path) -> None:
    """`verify` prints the importer's own `unchecked` line, not the generic one."""
    log = tmp_path / "run.arrow"
    note = import_areal(DATA / "pr-1350", log)
    result = CliRunner().invoke(main, ["verify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["unchecked"] == note["unchecked"]
    result = CliRunner().invoke(main, ["verify", str(log)])
    assert f"rolloutlog: {note['unchecked']}" in result.stderr


def test_versions_that_no_timeline_fits_are_one_line_naming_the_sample(tmp_path: Path) -> None:
    """Task 0 finished long before step 1's batch was prepared: a token of it under
    version 1 cannot be, and the import says so naming its dump line."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "pr-1350", run)
    dumps = run / TRIAL / "rollout"
    (dumps / "1").mkdir(exist_ok=True)
    rows = [json.loads(line) for line in (dumps / "0" / "0.jsonl").read_text().splitlines()]
    (dumps / "0" / "0.jsonl").unlink()
    tokens = rows[0]["seqlen"] - rows[0]["prompt_len"]
    rows[0].update(tail_version=1, version_rle=[[0, tokens - 1], [1, 1]])
    moved = dumps / "1" / "0.jsonl"
    moved.write_text("".join(json.dumps(row) + "\n" for row in rows))
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    expected = f"rolloutlog: error: {moved}: line 1: tail_version: 1, but version 1 can come only"
    assert line.startswith(expected), line
