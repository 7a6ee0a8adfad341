"""Rules between the events of a log (`events.log_rules`): a run finishes once, and a
version goes live only once announced. The writer refuses such an event; a log written
without checks is refused by every reader at the seq that breaks the rule, with what
comes before it read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.events.errors import EventError
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import LogWriter, write_log
from rolloutlog.events.types import Event, RunFinished, VersionLive, VersionPending

SIMULATED = Path(__file__).resolve().parents[2] / "examples" / "simulated.arrow"
SECOND_END = "run_finished.kind (seq {seq}): a second run_finished (the run finished at seq"
NEVER_ANNOUNCED = "version_live.version (seq {seq}): version 9 was never announced"


def _broken(kind: str) -> list[Event]:
    """The simulated run with one event after its end that breaks the rule `kind`."""
    events = read_log(SIMULATED)
    t, seq = events[-1].t, len(events)
    extra = RunFinished(t=t, seq=seq, reason="steps") if kind == "end" else None
    return [*events, extra or VersionLive(t=t, seq=seq, version=9)]


@pytest.mark.parametrize(("kind", "words"), [("end", SECOND_END), ("live", NEVER_ANNOUNCED)])
def test_a_reader_refuses_the_event_at_its_seq_after_reading_the_rest(
    tmp_path: Path, kind: str, words: str
) -> None:
    events, log = _broken(kind), tmp_path / "bad.arrow"
    with LogWriter(log, check_events=False) as writer:
        writer.extend(events)
    bad = len(events) - 1
    read: list[Event] = []
    with pytest.raises(EventError, match=re.escape(words.format(seq=bad))):
        read.extend(LogReader(log))
    assert read == events[:bad]
    for command in (["replay"], ["verify"]):
        result = CliRunner().invoke(main, [*command, str(log)])
        assert result.exit_code == 2 and words.format(seq=bad) in result.stderr, result.output


@pytest.mark.parametrize("kind", ["end", "live"])
def test_the_writer_refuses_the_event_and_stays_usable(tmp_path: Path, kind: str) -> None:
    *good, bad = _broken(kind)
    with LogWriter(tmp_path / "run.arrow") as writer:
        writer.extend(good)
        with pytest.raises(EventError, match=f"seq {bad.seq}"):
            writer.append(bad)
        assert writer.next_seq == bad.seq
    assert read_log(tmp_path / "run.arrow") == good


def test_appending_knows_the_rules_state_of_the_log_it_continues(tmp_path: Path) -> None:
    good = read_log(SIMULATED)
    write_log(tmp_path / "run.arrow", good)
    with LogWriter(tmp_path / "run.arrow", mode="append") as writer:
        t, seq = good[-1].t, len(good)
        with pytest.raises(EventError, match="a second run_finished"):
            writer.append(RunFinished(t=t, reason="steps"))
        writer.append(VersionPending(t=t, version=9))
        writer.append(VersionLive(t=t, version=9))
        assert writer.next_seq == seq + 2
