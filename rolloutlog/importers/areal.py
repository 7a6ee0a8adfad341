"""Import an AReaL run: its session tracer's `sessions*.jsonl` and its rollout dumps.

With `SessionTracerConfig.enabled`, AReaL 1.0.4 writes one JSON line per finished session
(`SessionRecord.to_dict()`: `task_id`, `session_id`, `status`, `reason`, `submit_ts`,
`finalized_ts`, `phases`); with `dump_to_file`, one line per sample under
`rollout/{tail_version}/{task_id}.jsonl` (`sample_idx`, `seqlen`, `prompt_len`,
`head_version`, `tail_version`, `reward`). A task is one group, its sessions the members.
Batches are in neither file, so the log ships none (docs/foreign-runs.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import attrs

from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.importers.errors import ForeignRunError, field, read_jsonl
from rolloutlog.importers.prime_rl import IMPORT_NOTE
from rolloutlog.record import Recorder

CODE_VERSION: Final = "AReaL (imported by rolloutlog)"
STATUSES: Final = ("pending", "accepted", "rejected", "failed", "dropped")
RECONSTRUCTED: Final = (
    "dispatch times (a session's submit_ts) and arrival times (its last phase's end_ts, "
    "else finalized_ts)",
    "outcomes: accepted and rejected sessions completed (rejected: the group not admitted), "
    "failed ones failed, pending ones still in flight at the end",
    "rewards and tokens (the rollout dump: reward, prompt_len, seqlen - prompt_len)",
    "groups: a task (task_id) is a group, its sessions the members",
)
ASSUMED: Final = (
    "versions: none announced: a version is announced only after its batch shipped, and the "
    "log ships no batch (each sample's head_version and tail_version are not kept)",
    "batches: neither file says what was trained when, so the log ships no batch",
    "a task's sessions, in session_id order, are its dump's samples in sample_idx order",
    "dropped sessions (a status 1.0.4 never writes) are recorded as overload cancellations",
    "a rejected session without a dump (its workflow returned nothing) failed",
    "late arrivals: none are written, so a what-if's late_arrival_rate rests on --set",
)


@attrs.frozen
class _Session:
    task: int
    session: int
    status: str
    reason: str
    submit: float
    end: float | None  # its last phase's end, else finalized_ts; None: still pending
    where: str


def import_areal(folder: str | os.PathLike[str], output: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the log of the AReaL run under `folder` to `output`; returns the import note."""
    root = Path(folder)
    session_files = sorted(root.rglob("sessions*.jsonl"))
    if not session_files:
        raise ForeignRunError(
            f"{root}: not an AReaL run: no sessions*.jsonl under it (SessionTracerConfig.enabled)"
        )
    sessions = [s for path in session_files for s in _sessions(path)]
    _refuse_repeats(sessions)
    dumps = _dumps(root)
    note = {
        "source": "areal",
        "folder": str(root),
        "reconstructed": list(RECONSTRUCTED),
        "assumed": list(ASSUMED),
    }
    members: dict[int, list[_Session]] = {}
    for session in sorted(sessions, key=lambda s: (s.task, s.session)):
        members.setdefault(session.task, []).append(session)
    outcomes = {(s.task, s.session): _outcome(s, m, dumps) for m in members.values() for s in m}
    origin = min(s.submit for s in sessions)
    timeline: list[tuple[float, int, str, Any]] = []
    for session in sessions:
        timeline.append((session.submit, 1, "dispatch", session))
        if session.end is not None:
            timeline.append((max(session.end, session.submit), 2, "arrive", session))
    config = {"group_size": max(len(m) for m in members.values()), "max_inflight": len(sessions)}
    with Recorder(
        output, config=config, code_version=CODE_VERSION, overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:  # fmt: skip
        done: dict[int, int] = {}
        for t, _, kind, what in sorted(timeline, key=lambda item: item[:2]):
            now = t - origin
            if kind == "dispatch":
                group = str(what.task)
                if what.task not in done:
                    done[what.task] = 0
                    size = len(members[what.task])
                    rec.open_group(now, group, env="areal", task=group, size=size)
                rec.dispatch(now, group, f"{what.task}/{what.session}")
            else:
                _arrive(rec, now, what, outcomes[what.task, what.session])
                done[what.task] += 1
                finished = [m for m in members[what.task] if m.end is not None]
                if done[what.task] == len(finished) == len(members[what.task]):
                    _score(rec, now, members[what.task], outcomes)
        rec.finish(max(t for t, *_ in timeline) - origin, reason="imported")
    return note


def _sessions(path: Path) -> list[_Session]:
    found = []
    for line, record in read_jsonl(path):
        where = f"{path}: line {line}"
        status = field(record, "status", str, where)
        if status not in STATUSES:
            raise ForeignRunError(f"{where}: status: expected one of {STATUSES}, got {status!r}")
        ends = [
            span.get("end_ts")
            for spans in (record.get("phases") or {}).values()
            for span in spans
            if span.get("end_ts") is not None
        ]
        finalized = record.get("finalized_ts")
        end = max(ends) if ends else finalized
        found.append(
            _Session(
                task=field(record, "task_id", int, where),
                session=field(record, "session_id", int, where),
                status=status,
                reason=str(record.get("reason") or status),
                submit=field(record, "submit_ts", float, where),
                end=None if status == "pending" else (float(end) if end is not None else None),
                where=where,
            )
        )
        if status != "pending" and end is None:
            raise ForeignRunError(f"{where}: finalized_ts: missing, and no phase has an end_ts")
    return found


def _refuse_repeats(sessions: list[_Session]) -> None:
    """Each (task_id, session_id) once: two ranks' traces number their sessions apart only
    if their task ids differ, and nothing else tells their sessions apart."""
    seen: dict[tuple[int, int], str] = {}
    for session in sessions:
        key = (session.task, session.session)
        if key in seen:
            problem = f"session {session.session} of task {session.task} is also at {seen[key]}"
            raise ForeignRunError(f"{session.where}: session_id: {problem}")
        seen[key] = session.where


def _dumps(root: Path) -> dict[tuple[int, int], tuple[str, dict[str, Any]]]:
    """(task_id, sample_idx) -> the dump record, from `rollout/{version}/{task_id}.jsonl`."""
    dumps = {}
    for path in sorted(root.rglob("*.jsonl")):
        if not (path.stem.isdigit() and path.parent.name.isdigit()):
            continue
        for line, record in read_jsonl(path):
            where = f"{path}: line {line}"
            key = (field(record, "task_id", int, where), field(record, "sample_idx", int, where))
            dumps[key] = (where, record)
    return dumps


def _outcome(
    session: _Session,
    members: list[_Session],
    dumps: dict[tuple[int, int], tuple[str, dict[str, Any]]],
) -> tuple[float, int, int, int] | None:
    """(reward, head_version, prompt tokens, completion tokens) of a completed session."""
    if session.status not in ("accepted", "rejected"):
        return None
    index = members.index(session)
    found = dumps.get((session.task, index))
    if found is None and session.status == "rejected":
        return None  # the workflow returned no trajectory: nothing was dumped
    if found is None:
        problem = f"task {session.task} sample {index} has no rollout dump (dump_to_file)"
        raise ForeignRunError(f"{session.where}: task_id: {problem}")
    where, record = found
    prompt = field(record, "prompt_len", int, where)
    return (
        field(record, "reward", float, where),
        field(record, "head_version", int, where),
        prompt,
        field(record, "seqlen", int, where) - prompt,
    )


def _arrive(
    rec: Recorder, now: float, session: _Session, outcome: tuple[float, int, int, int] | None
) -> None:
    episode = f"{session.task}/{session.session}"
    if session.status == "dropped":
        rec.cancel(now, str(session.task), [episode], reason="overload")
    elif outcome is None:
        rec.fail(now, episode, error=session.reason)
    else:
        reward, _, prompt, completion = outcome
        rec.complete(
            now, episode, reward=reward, prompt_tokens=prompt, completion_tokens=completion
        )


def _score(
    rec: Recorder,
    now: float,
    members: list[_Session],
    outcomes: dict[tuple[int, int], tuple[float, int, int, int] | None],
) -> None:
    scored = [m for m in members if outcomes[m.task, m.session] is not None]
    rewards = [outcomes[m.task, m.session][0] for m in scored]  # type: ignore[index]
    advantages = dict(
        zip((f"{m.task}/{m.session}" for m in scored), grpo_advantages(rewards), strict=True)
    )
    admitted = bool(scored) and all(m.status == "accepted" for m in scored)
    rec.score(now, str(members[0].task), advantages, admitted=admitted)
