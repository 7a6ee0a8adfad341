"""Every rule between events that docs/contract.md and docs/log-format.md state, broken
once in a real recorded run: `replay` and `verify` both refuse the log at the seq of the
event that breaks it (an error, a property violation or a divergence naming that seq),
never reading past it in silence. One case per rule, the contract's words beside it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    RunFinished,
    RunResumed,
    VersionLive,
    VersionPending,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log

# 167 events: max_inflight 6, group_size 4, batch_size 8; seq 2..8 dispatch g1/0-3 and
# g2/0-1 (six in flight at seq 8), run_finished at 160, the shutdown's events after it
SIMULATED = Path(__file__).resolve().parents[2] / "examples" / "simulated.arrow"
EVENTS = read_log(SIMULATED)
END = next(e.seq for e in EVENTS if e.kind == "run_finished")
T_END = EVENTS[-1].t


def inserted(at: int, event: Event) -> tuple[list[Event], int]:
    """The run with `event` inserted as seq `at` (at the time of the event before it)."""
    event = attrs.evolve(event, t=EVENTS[at - 1].t)
    later = [attrs.evolve(e, seq=e.seq + 1) for e in EVENTS[at:]]
    return [*EVENTS[:at], attrs.evolve(event, seq=at), *later], at


def appended(event: Event) -> tuple[list[Event], int]:
    return inserted(len(EVENTS), event)


def changed(seq: int, **fields: object) -> tuple[list[Event], int]:
    events = list(EVENTS)
    events[seq] = attrs.evolve(events[seq], **fields)
    return events, seq


def dispatch(episode_id: str, member: int) -> EpisodeDispatched:
    group = episode_id.partition("/")[0]
    return EpisodeDispatched(
        t=0, episode_id=episode_id, group_id=group, member=member, policy_version=0
    )


def completion(episode_id: str) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=0, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
    )


# (the rule, as the docs state it; the run broken once)
RULES: dict[str, Callable[[], tuple[list[Event], int]]] = {
    "a run finishes once (log-format: one run_finished)": lambda: appended(
        RunFinished(t=T_END, reason="steps")
    ),
    "version_live(v) only after version_pending(v)": lambda: inserted(
        9, VersionLive(t=0, version=1)
    ),
    "each version is announced once, in order, after its batch shipped": lambda: inserted(
        9, VersionPending(t=0, version=1)
    ),
    "t never goes back": lambda: changed(11, t=1.0),
    "a completion for an episode never dispatched is refused": lambda: inserted(
        9, completion("g9/0")
    ),
    "nothing is opened after run_finished": lambda: appended(
        attrs.evolve(EVENTS[1], t=T_END, group_id="g16", step=6)  # g1's opening, renamed
    ),
    "nothing is dispatched after run_finished": lambda: inserted(END + 1, dispatch("g13/1", 1)),
    "nothing ships after run_finished": lambda: appended(
        BatchShipped(
            t=T_END,
            step=6,
            episode_ids=(),
            trained_ids=(),
            tokens=0,
            masked_tokens=0,
        )
    ),
    "after run_finished a restart is refused": lambda: appended(
        RunResumed(t=T_END, reason="crash", episode_ids=(), version=3)
    ),
    "run_resumed names exactly the episodes in flight": lambda: inserted(
        9, RunResumed(t=0, reason="crash", episode_ids=("g1/0",), version=0)
    ),
    "permits: never above the limit at admission": lambda: inserted(9, dispatch("g2/2", 2)),
    "groups g1, g2, ... in opening order": lambda: changed(6, group_id="g3"),
    "members 0 ... G-1 in dispatch order": lambda: changed(7, member=1, episode_id="g2/1"),
    "an episode_interrupted the run's rules do not make (freeze without recycle)": (
        lambda: inserted(
            9,
            EpisodeInterrupted(t=0, episode_id="g1/0", completion_tokens=1, reason="update"),
        )
    ),
    "an episode_resumed of an episode not interrupted": lambda: inserted(
        9, EpisodeResumed(t=0, episode_id="g1/0", policy_version=0)
    ),
    "every finalized group gets exactly one group_scored": lambda: inserted(31, EVENTS[30]),
    "batch s is the step being collected": lambda: changed(40, step=2),
}


def refusal_of_replay(log: Path) -> str:
    replay = replay_log(open_log(log))
    return f"{replay.error} {replay.violations}"


def refusal_of_verify(log: Path) -> str:
    verdict = verify_log(open_log(log))
    divergence = "" if verdict.divergence is None else f"seq {verdict.divergence.seq}"
    return f"{verdict.error} {divergence}"


@pytest.mark.parametrize("rule", list(RULES))
def test_replay_and_verify_refuse_a_broken_rule_at_its_seq(tmp_path: Path, rule: str) -> None:
    events, seq = RULES[rule]()
    log = tmp_path / "broken.arrow"
    with LogWriter(log, check_events=False) as writer:
        writer.extend(events)
    at_seq = re.compile(rf"\bseq {seq}\b")
    for command, refusal in (("replay", refusal_of_replay), ("verify", refusal_of_verify)):
        said = refusal(log)
        assert at_seq.search(said), f"{command} of a log that breaks {rule!r}: {said}"
