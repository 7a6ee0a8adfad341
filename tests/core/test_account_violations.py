"""What the account reports on damaged logs: each violation names the event it was found at.

Valid logs never reach the account's failure branches; damaged ones (one decided event
changed, removed, duplicated or swapped) do, and each report must point at a real event of
the log by its seq and kind, so that a reader can find it.
"""

from __future__ import annotations

import re

from hypothesis import given

from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import Tampered, tampered_logs

REPORT = re.compile(r"seq (\d+) \(([a-z_]+)\): (\S.*)")


@given(tampered_logs())
def test_each_violation_names_the_seq_and_kind_of_an_event_of_the_log(
    tampered: Tampered,
) -> None:
    result = fold_events(tampered.log)
    assert result.fold is not None
    for report in result.fold.summary()["invariant_violations"]:
        match = REPORT.fullmatch(report)
        assert match is not None, report
        seq, kind = int(match[1]), match[2]
        assert seq < len(tampered.log) and tampered.log[seq].kind == kind, report
