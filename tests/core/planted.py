"""Shared by the planted-fault suites: the recorded config of a log, and an account fed a
log the way a fold feeds it (settled after each world event's reaction)."""

from __future__ import annotations

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import WORLD_KINDS, Event, RunResumed, RunStarted


def config_of(log: list[Event]) -> RunConfig:
    first = log[0]
    if not isinstance(first, RunStarted):
        raise ValueError(f"a log starts with run_started, not {first.kind}")
    return RunConfig.from_mapping(first.config, where="run_started.config", startable=False)


def account_for(log: list[Event], *, raising: bool = False) -> Account:
    """An account for `log`'s config that collects its reports (or raises the first)."""
    return Account(config_of(log), raise_on_violation=raising)


def fed(log: list[Event], *, raising: bool = False) -> Account:
    """The account fed `log` and settled after each world event's reaction, as a fold does."""
    account = account_for(log, raising=raising)
    last_world: Event | None = None
    for event in log:
        if event.kind in WORLD_KINDS and last_world is not None:
            account.settled(last_world)
        account.feed(event)
        if event.kind in WORLD_KINDS:
            last_world = event
    if last_world is not None:
        account.settled(last_world)
    return account


def valid_restart(account: Account, t: float, seq: int) -> RunResumed:
    """A restart the account accepts: it names what is outstanding, at the last version."""
    return RunResumed(
        t=t, seq=seq, reason="restart", episode_ids=tuple(account.inflight), version=account.version
    )
