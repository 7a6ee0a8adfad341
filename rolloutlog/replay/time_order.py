"""`t` never goes back (docs/contract.md): the events where a log breaks it, as violations.

The deciders never read `t`, so a fold applies such a log as recorded and reports each
applied event whose `t` is before the previous event's, naming its seq, in the words of
`events.validate.t_order_problem`, which `import` refuses a line with. Both folds keep one
`TimeOrder` as they go, so `replay` needs no second pass: the plain fold feeds it each
event, the columnar fold each record batch's `t` column at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rolloutlog.events.validate import t_order_problem


class TimeOrder:
    """The violations of the `t` order among the events fed so far."""

    __slots__ = ("previous", "violations")

    def __init__(self) -> None:
        self.previous = 0.0  # the `t` of the event before the next one fed
        self.violations: list[str] = []

    def event(self, seq: int, kind: str, t: float) -> None:
        """One applied event."""
        if t < self.previous:
            self._report(seq, kind, self.previous, t)
        self.previous = t

    def batch(self, first: int, times: np.ndarray[Any, Any], kinds: Sequence[str]) -> None:
        """Consecutive applied events from seq `first`: their `t` and their kinds."""
        if not len(times):
            return
        previous_each = np.concatenate(([self.previous], times[:-1]))
        for row in np.flatnonzero(times < previous_each).tolist():
            self._report(first + row, kinds[row], float(previous_each[row]), times[row])
        self.previous = float(times[-1])

    def _report(self, seq: int, kind: str, previous: float, t: float) -> None:
        problem = t_order_problem(float(previous), float(t))
        self.violations.append(f"seq {seq} ({kind}): t {problem}")

    def listed(self, summary: dict[str, Any]) -> dict[str, Any]:
        """`summary` (an account's report) with these violations after the account's."""
        listed = [*summary["invariant_violations"], *self.violations]
        return {**summary, "invariant_violations": listed}
