"""`t` never goes back (docs/contract.md): the events where a log breaks it, as violations.

The deciders never read `t`, so a fold applies such a log as recorded; `replay` reports
each event whose `t` is before the previous event's, naming its seq, in the words of
`events.validate.t_order_problem`, which `import` refuses a line with. The check reads
only the `t` column of each record batch.
"""

from __future__ import annotations

import numpy as np

from rolloutlog.events.validate import t_order_problem
from rolloutlog.replay.source import LogSource


def t_order_violations(source: LogSource, *, before: int | None = None) -> list[str]:
    """Each event (before seq `before`, when given: where a fold stopped) whose `t` is
    before the previous event's, as "seq N (kind): t ... (t never goes back)"."""
    violations: list[str] = []
    previous = 0.0
    for batch in source.batches():
        times = batch.column("t").to_numpy(zero_copy_only=False)
        if not len(times):
            continue
        if before is not None and batch.column("seq")[0].as_py() >= before:
            break
        previous_each = np.concatenate(([previous], times[:-1]))
        for row in np.flatnonzero(times < previous_each):
            seq = batch.column("seq")[row].as_py()
            if before is not None and seq >= before:
                return violations
            kind = batch.column("kind")[row].as_py()
            problem = t_order_problem(float(previous_each[row]), float(times[row]))
            violations.append(f"seq {seq} ({kind}): t {problem}")
        previous = float(times[-1])
    return violations
