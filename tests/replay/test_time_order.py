"""`t` never goes back: `replay` reports each event whose `t` is before the previous one's,
checked by the fold itself on either path."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import LogWriter, write_log
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from tests.cli.test_cli_log import EXAMPLE
from tests.invoke import run

BACK = "seq 17 (episode_completed): t 0.5 is before the previous event's t, 3.0 (t never goes back)"


def log_going_back(tmp_path: Path) -> Path:
    """EXAMPLE with seq 17's t (3.25) set to 0.5, written through the recording API, which
    (unlike `import`) takes it."""
    events = read_log(EXAMPLE)
    assert events[17].t == 3.25 and events[16].t == 3.0
    events[17] = attrs.evolve(events[17], t=0.5)
    write_log(tmp_path / "back.arrow", events)
    return tmp_path / "back.arrow"


@pytest.mark.parametrize("plain", [[], ["--plain"]])
def test_replay_reports_t_going_back_as_a_violation_naming_the_seq(
    tmp_path: Path, plain: list[str]
) -> None:
    log = log_going_back(tmp_path)
    result = run("replay", log, *plain)
    assert result.exit_code == 1, result.output
    assert BACK in " ".join(result.stdout.split())  # the table wraps long lines
    report = json.loads(run("replay", "--json", log, *plain).stdout)
    assert report["invariant_violations"] == [BACK]


@pytest.mark.parametrize("columnar", [True, False])
def test_each_event_that_goes_back_is_named_across_record_batches(columnar: bool) -> None:
    events = read_log(EXAMPLE)
    events[5] = attrs.evolve(events[5], t=-0.0)  # not before 0.0: no violation
    events[20] = attrs.evolve(events[20], t=1.0)  # the first event of a batch of 4
    replay = replay_log(MemoryLog(events, batch_events=4), columnar=columnar)
    assert replay.path == ("columnar" if columnar else "plain")  # no hand-over for `t`
    assert replay.violations == [
        "seq 20 (group_scored): t 1.0 is before the previous event's t, 3.75 (t never goes back)"
    ]
    assert replay_log(MemoryLog(read_log(EXAMPLE)), columnar=columnar).violations == []


@pytest.mark.parametrize("columnar", [True, False])
def test_only_the_events_a_fold_applied_are_checked(columnar: bool) -> None:
    events = read_log(EXAMPLE)
    events[20] = attrs.evolve(events[20], t=1.0)
    bogus = attrs.evolve(events[3], seq=21)  # a second dispatch of one episode: refused
    stopped = replay_log(MemoryLog([*events[:21], bogus]), columnar=columnar)
    assert (stopped.events, stopped.error is not None) == (21, True)
    assert [v.split(" ")[1] for v in stopped.violations] == ["20"]
    earlier = replay_log(MemoryLog([*events[:20], attrs.evolve(bogus, seq=20)]), columnar=columnar)
    assert (earlier.events, earlier.violations) == (20, [])


def test_t_going_back_is_reported_when_a_later_batch_is_unreadable(tmp_path: Path) -> None:
    # A second pass over the log lost every t violation when it met the damaged batch.
    events = read_log(EXAMPLE)
    events[17] = attrs.evolve(events[17], t=0.5)
    path = tmp_path / "damaged.arrow"
    with LogWriter(path, mode="overwrite", fsync=False, batch_events=10) as log:
        for event in events:
            log.append(event)
    data = bytearray(path.read_bytes())
    data[-200] ^= 0xFF  # inside the last record batch, the one from seq 20
    path.write_bytes(bytes(data))
    result = run("replay", "--json", path)
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert "where seq 20 should start" in report["error"]
    assert report["invariant_violations"] == [BACK]
