"""verify: every generated log passes; one tampered decided event fails at exactly its seq;
bad input is an error naming the seq; a log survives export → import and still verifies."""

from __future__ import annotations

import io
from pathlib import Path

import attrs
import pytest
from hypothesis import given

from rolloutlog.events.jsonl import read_jsonl, write_jsonl
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    Event,
)
from rolloutlog.replay.source import MemoryLog, open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.testing.strategies import Tampered, tampered_logs, world_logs
from tests.replay.replay_helpers import small_log, unfinished_log


@given(world_logs())
def test_every_generated_log_verifies(log: list[Event]) -> None:
    verdict = verify_log(MemoryLog(log))
    assert verdict.ok, verdict
    assert verdict.events == len(log)


@given(tampered_logs(decided_only=True))
def test_a_tampered_decided_event_fails_at_exactly_its_seq(tampered: Tampered) -> None:
    verdict = verify_log(MemoryLog(tampered.log))
    assert verdict.error is None, verdict.error
    assert verdict.divergence is not None, tampered.how
    assert verdict.divergence.seq == tampered.seq, tampered.how
    assert verdict.events == tampered.seq  # everything before it matched


def test_a_divergence_names_both_events_and_the_state_before_it() -> None:
    log = small_log()
    index = next(i for i, e in enumerate(log) if e.kind == "group_scored")
    log[index] = attrs.evolve(log[index], admitted=not log[index].admitted)  # type: ignore[attr-defined]
    divergence = verify_log(MemoryLog(log)).divergence
    assert divergence is not None
    assert divergence.seq == index
    assert divergence.expected == small_log()[index]
    assert divergence.recorded == log[index]
    assert divergence.state["seq"] == index - 1
    assert [g["group_id"] for g in divergence.state["groups"]] == ["g1"]
    assert f"seq {index}" in divergence.describe()


def test_a_log_missing_its_last_decisions_diverges_where_they_were_owed() -> None:
    log = small_log()
    cut = len(log) - 1  # the shutdown cancellation the deciders owe after run_finished
    divergence = verify_log(MemoryLog(log[:cut])).divergence
    assert divergence is not None
    assert (divergence.seq, divergence.recorded) == (cut, None)
    assert divergence.expected == log[cut]


@pytest.mark.parametrize(
    ("change", "seq", "words"),
    [
        # a completion for an episode that was never dispatched
        (lambda log: [*log, _completion(len(log), "g9/0")], -1, "never dispatched"),
        # a seq gap
        (lambda log: [*log[:3], *(attrs.evolve(e, seq=e.seq + 1) for e in log[3:])], 3, "seq"),
    ],
    ids=["never-dispatched", "seq-gap"],
)
def test_bad_input_is_an_error_naming_the_seq(change, seq, words) -> None:
    log = change(unfinished_log())
    verdict = verify_log(MemoryLog(log))
    assert verdict.error is not None and verdict.divergence is None
    expected_seq = log[seq].seq if seq == -1 else seq
    assert f"seq {expected_seq}" in str(verdict.error) and words in str(verdict.error)


def _completion(seq: int, episode_id: str) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=9.0, seq=seq, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
    )


def test_a_batch_for_the_wrong_step_diverges_at_that_seq() -> None:
    log = small_log()
    index = next(i for i, e in enumerate(log) if isinstance(e, BatchShipped))
    log[index] = attrs.evolve(log[index], step=2)
    divergence = verify_log(MemoryLog(log)).divergence
    assert divergence is not None and divergence.seq == index


@given(world_logs(max_steps=60))
def test_export_import_verify(tmp_path_factory: pytest.TempPathFactory, log: list[Event]) -> None:
    text = io.StringIO()
    write_jsonl(log, text)
    path: Path = tmp_path_factory.mktemp("roundtrip") / "log.arrow"
    write_log(path, read_jsonl(io.StringIO(text.getvalue()).readlines()))
    assert list(open_log(path).events()) == log
    assert verify_log(open_log(path)).ok
