"""Every `version_pending` announces a new version whose batch has shipped.

Written through the recording API (or imported), a log can announce a version before its
batch ships, go backwards, or announce one twice. The deciders refuse such a log at that
seq, so `replay` (both folds) and `verify` stop there naming it; the account checks the same
rule on its own (a loop observer sees it as a violation), and no report shows a negative
rollout age (prime-rl clamps its lag at 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from rolloutlog.core import dispatcher
from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    Event,
    RunFinished,
    RunStarted,
    VersionPending,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.replay.verify import verify_log

CONFIG = RunConfig.from_mapping({"group_size": 2, "max_inflight": 2, "batch_size": 2})


def _completions(t: float, *episode_ids: str) -> Iterator[Event]:
    for episode_id in episode_ids:
        yield EpisodeCompleted(
            t=t,
            episode_id=episode_id,
            reward=float(episode_id[-1]),  # members differ: the batch trains them
            prompt_tokens=1,
            completion_tokens=1,
        )


@contextmanager
def _versions_unchecked() -> Iterator[None]:
    """The deciders as a foreign orchestrator that does not check its versions: the
    dispatcher's version check left out while the log is written."""
    checks = dispatcher._CHECKS
    check = checks.pop(VersionPending)
    try:
        yield
    finally:
        checks[VersionPending] = check


def _log(announced: list[int], *observers: Account) -> tuple[list[Event], list[int]]:
    """A hand-fed run with one batch shipped, then the versions `announced`, then two more
    batches; or, with `announced` first, the versions before any batch. Also the seqs of
    each version_pending."""
    with _versions_unchecked():
        return _fed(announced, observers)


def _fed(announced: list[int], observers: tuple[Account, ...]) -> tuple[list[Event], list[int]]:
    loop = ReactionLoop(CONFIG, observers=observers)
    started = RunStarted(
        t=0.0, config=CONFIG.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    log, pending = loop.feed(started), []
    world: list[Event] = [*_completions(1.0, "g1/0", "g1/1")]
    world += [VersionPending(t=2.0, version=version) for version in announced]
    world += [*_completions(3.0, "g2/0", "g2/1", "g3/0", "g3/1"), RunFinished(t=4.0, reason="x")]
    for event in world:
        appended = loop.feed(event)
        if isinstance(event, VersionPending):
            pending.append(appended[0].seq)
        log += appended
    return log, pending


CASES = {
    "before its batch shipped": ([5], 0, "v5 after v0 with 1 batches shipped"),
    "backwards": ([1, 0], 1, "v0 after v1 with 1 batches shipped"),
    "announced twice": ([1, 1], 1, "v1 after v1 with 1 batches shipped"),
}


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_replay_stops_at_a_version_announced_out_of_turn_naming_its_seq(
    case: str, columnar: bool
) -> None:
    announced, which, problem = CASES[case]
    log, pending = _log(announced)
    replay = replay_log(MemoryLog(log), columnar=columnar)
    assert str(replay.error) == (
        f"seq {pending[which]} (version_pending): {problem}: "
        "a version is announced once, after its batch"
    )
    assert replay.events == pending[which]


@pytest.mark.parametrize("case", sorted(CASES))
def test_verify_refuses_a_version_announced_out_of_turn_at_its_seq(case: str) -> None:
    announced, which, problem = CASES[case]
    log, pending = _log(announced)
    verification = verify_log(MemoryLog(log))
    assert not verification.ok
    assert f"seq {pending[which]} (version_pending): {problem}" in str(verification.error)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_account_names_the_same_seq_on_its_own(case: str) -> None:
    announced, which, problem = CASES[case]
    account = Account(CONFIG, raise_on_violation=False)
    _, pending = _log(announced, account)
    assert account.violations[:1] == [
        f"seq {pending[which]} (version_pending): {problem}: "
        "a version is announced once, after its batch"
    ]


def test_in_turn_the_same_versions_are_clean() -> None:
    log, _ = _log([1])
    assert replay_log(MemoryLog(log)).violations == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_report_shows_a_negative_age(case: str) -> None:
    log, _ = _log(CASES[case][0])
    summary = replay_log(MemoryLog(log)).summary
    assert all(int(age) >= 0 for age in summary["trained_age_histogram"])
    assert (summary["max_trained_age"] or 0) >= 0 and (summary["mean_trained_age"] or 0) >= 0
    metrics = StepMetrics.from_batches(MemoryLog(log).batches())
    values = [*metrics.run_values().values(), *(v for row in metrics.rows for v in row.values())]
    assert all(value is None or value >= 0 for value in values)
