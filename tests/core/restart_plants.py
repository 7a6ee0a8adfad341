"""The plants of `test_account_faults_partial.py` for the version and restart reports of
`core.account.restart` that `test_account_faults.py` leaves, kept here so that the test file
holds its worlds, tables and tests: a version announced off its batch or inside the
checkpoint a restart resumed from, a restart after the end, and one whose cancellations
never come. Each takes `(account, event)` and returns `Planted | None`, or builds such a
plant; the restart they put in is `tests/core/partial_plants.py`'s."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rolloutlog.core.account import Account
from rolloutlog.events.types import Event, RunFinished, VersionPending
from tests.core.partial_plants import restart_with_cuts
from tests.core.planted import valid_restart
from tests.core.planted_faults import Plant, Planted, restart_point

# --- version_pending and run_resumed (core.account.restart) ---------------------------


def announced_at(version: Callable[[Account], int]) -> Plant:
    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, VersionPending):
            return None
        v, shipped = version(account), account.shipped()
        problem = f"v{v} after v{account.version} with {shipped} batches shipped"
        return [attrs.evolve(event, version=v)], problem + ": a version is announced once"

    return plant


def announced_in_the_checkpoint(inside: int) -> Plant:
    """A restart from the last batch shipped, ahead of the announced version, then the
    version `inside` versions before that checkpoint, still past the announced one (0: the
    checkpoint itself, the boundary, taken)."""

    def plant(account: Account, event: Event) -> Planted | None:
        shipped = account.shipped()
        v = shipped - inside
        if not restart_point(account, event) or v <= account.version:
            return None
        announced = VersionPending(t=event.t, version=v)
        problem = f"v{v} is inside checkpoint v{shipped} resumed from: its batch would train"
        return [*restart_with_cuts(account, event, shipped), announced], problem

    return plant


def restart_after_the_end(account: Account, event: Event) -> Planted | None:
    if not restart_point(account, event):
        return None
    restart = valid_restart(account, event.t, event.seq)
    return [RunFinished(t=event.t, reason="steps"), restart], "a restart after run_finished"


def restart_leaves_work_in_flight(account: Account, event: Event) -> Planted | None:
    """A restart whose cancellations never come: at its settling, what it named is still
    in flight."""
    if not restart_point(account, event):
        return None
    restart = valid_restart(account, event.t, event.seq)
    return [restart], f"outstanding at the restart, in flight: {sorted(account.inflight)[:3]}"
