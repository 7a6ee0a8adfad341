"""Import an AReaL run: its session trace, its rollout dumps and, when there, its config.

A task is one group (AReaL's `GroupedRolloutWorkflow` runs the workflow `n_samples` times
and concatenates the trajectories that are not None), its sessions the members in
`session_id` order. A task of the `eval-rollout` engine is an eval group. What each file
holds is in `areal_files`; what the log can say of it, in docs/foreign-runs.md. Batches are
in none of the files, so the log ships none and announces no version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.importers.areal_files import (
    Sample,
    Session,
    read_config,
    read_dumps,
    read_sessions,
)
from rolloutlog.importers.errors import ForeignRunError
from rolloutlog.importers.prime_rl import IMPORT_NOTE
from rolloutlog.record import Recorder

CODE_VERSION: Final = "AReaL (imported by rolloutlog)"
RECONSTRUCTED: Final = (
    "dispatch times (a session's submit_ts) and arrival times (its last phase's end_ts, "
    "else finalized_ts)",
    "outcomes: accepted and rejected sessions completed (rejected: the group not admitted), "
    "failed ones failed, pending ones still in flight at the end, a session whose reward "
    "phase never ended failed (its workflow returned None: AReaL skips it)",
    "rewards and tokens (the rollout dump: reward, prompt_len, seqlen - prompt_len), the "
    "dump's sample_idx counting the sessions that returned a sample, in session_id order",
    "groups: a task is a group, its sessions the members; the eval-rollout engine's tasks "
    "(role eval-rollout, dumps under eval-rollout/) are eval groups",
)
ASSUMED: Final = (
    "versions: none announced: a version is announced only after its batch shipped, and the "
    "log ships no batch; each sample's head_version, tail_version and version_rle are "
    "checked and counted in this note, not yet turned into dispatch stamps and segments",
    "batches: no file says which groups trained at which step, so the log ships no batch",
    "dropped sessions (a status AReaL 4aef98d never writes) are recorded as overload cancellations",
    "late arrivals: none are written, so a what-if's late_arrival_rate rests on --set",
)
Outcome = Sample | str | None  # the sample; why there is none (a failure); None: no outcome


def import_areal(folder: str | os.PathLike[str], output: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the log of the AReaL run under `folder` to `output`; returns the import note."""
    root = Path(folder)
    session_files = sorted(root.rglob("sessions*.jsonl"))
    if not session_files:
        raise ForeignRunError(
            f"{root}: not an AReaL run: no sessions*.jsonl under it (SessionTracerConfig.enabled)"
        )
    sessions = [s for path in session_files for s in read_sessions(path)]
    _refuse_repeats(sessions)
    dumps = read_dumps(root)
    members: dict[tuple[str, int], list[Session]] = {}
    for session in sorted(sessions, key=lambda s: (s.work, s.task, s.session)):
        members.setdefault((session.work, session.task), []).append(session)
    outcomes: dict[Session, Outcome] = {}
    for key, group in members.items():
        outcomes.update(_pair(group, {i: s for (w, t, i), s in dumps.items() if (w, t) == key}))
    config, facts = _run_config(root, members)
    note = {
        "source": "areal",
        "folder": str(root),
        "reconstructed": list(RECONSTRUCTED),
        "assumed": [*facts, *ASSUMED],
        "versions": _version_counts(dumps.values()),
    }
    _record(output, config, note, members, outcomes)
    return note


def _record(
    output: str | os.PathLike[str],
    config: Mapping[str, int],
    note: dict[str, Any],
    members: dict[tuple[str, int], list[Session]],
    outcomes: dict[Session, Outcome],
) -> None:
    sessions = [s for group in members.values() for s in group]
    origin = min(s.submit for s in sessions)
    timeline: list[tuple[float, int, Session]] = []
    for session in sessions:
        timeline.append((session.submit, 1, session))
        if session.end is not None:
            timeline.append((max(session.end, session.submit), 2, session))
    with Recorder(
        output, config=config, code_version=CODE_VERSION, overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:  # fmt: skip
        arrived: dict[tuple[str, int], int] = {}
        for t, kind, what in sorted(timeline, key=lambda item: item[:2]):
            key, now = (what.work, what.task), t - origin
            if kind == 1:
                if key not in arrived:
                    arrived[key] = 0
                    size, task = len(members[key]), str(what.task)
                    rec.open_group(
                        now, _group_id(key), env="areal", task=task, work=key[0], size=size
                    )
                rec.dispatch(now, _group_id(key), _episode_id(what))
                continue
            _arrive(rec, now, what, outcomes[what])
            arrived[key] += 1
            if arrived[key] == len(members[key]):
                _score(rec, now, members[key], outcomes)
        rec.finish(max(t for t, *_ in timeline) - origin, reason="imported")


def _group_id(key: tuple[str, int]) -> str:
    work, task = key
    return str(task) if work == "train" else f"eval/{task}"


def _episode_id(session: Session) -> str:
    return f"{_group_id((session.work, session.task))}/{session.session}"


def _refuse_repeats(sessions: list[Session]) -> None:
    """Each (engine, task_id, session_id) once: two ranks' traces number their sessions
    apart only if their task ids differ, and nothing else tells their sessions apart."""
    seen: dict[tuple[str, int, int], str] = {}
    for session in sessions:
        key = (session.work, session.task, session.session)
        if key in seen:
            problem = f"session {session.session} of task {session.task} is also at {seen[key]}"
            raise ForeignRunError(f"{session.where}: session_id: {problem}")
        seen[key] = session.where


def _pair(members: list[Session], rows: dict[int, Sample]) -> dict[Session, Outcome]:
    """Each member's outcome. `sample_idx` counts only the members whose workflow returned a
    sample: where any member's reward phase ended, those are the members that returned one;
    the others returned None and failed."""
    tracked = any(m.scored for m in members)
    returned = [m for m in members if m.scored or not tracked]
    extra = sorted(i for i in rows if not 0 <= i < len(returned))
    if extra:
        where = rows[extra[0]].where
        problem = f"{len(returned)} sessions of task {members[0].task} returned a sample"
        raise ForeignRunError(f"{where}: sample_idx: {extra[0]} is out of range ({problem})")
    outcomes: dict[Session, Outcome] = {}
    for member in members:
        if member.status not in ("accepted", "rejected"):
            outcomes[member] = None
        elif member not in returned:
            outcomes[member] = "returned_none"
        else:
            outcomes[member] = rows.get(returned.index(member)) or _undumped(member, returned)
    return outcomes


def _undumped(member: Session, returned: list[Session]) -> str:
    """A rejected group's member without a sample failed; an accepted one's is refused."""
    if member.status == "rejected":
        return member.reason
    index = returned.index(member)
    problem = f"task {member.task} sample {index} has no rollout dump (dump_to_file)"
    raise ForeignRunError(f"{member.where}: task_id: {problem}")


def _run_config(
    root: Path, members: dict[tuple[str, int], list[Session]]
) -> tuple[dict[str, int], list[str]]:
    """The log's group_size and max_inflight, from AReaL's config.yaml where it is, and
    what had to be assumed without it."""
    largest = max(len(m) for m in members.values())
    found = sorted(root.rglob("config.yaml"))
    if len(found) > 1:
        raise ForeignRunError(f"{found[1]}: config.yaml: a second one (the first: {found[0]})")
    if not found:
        sessions = sum(len(m) for m in members.values())
        absent = (
            f"absent: config.yaml (AReaL's save_config): group_size is the largest task "
            f"({largest} sessions), max_inflight the number of sessions ({sessions})"
        )
        return {"group_size": largest, "max_inflight": sessions}, [absent]
    path = found[0]
    values = read_config(path)
    group_size = _positive(values, "gconfig.n_samples", path)
    batch = _positive(values, "rollout.consumer_batch_size", path)
    if values["rollout.max_concurrent_rollouts"] is not None:
        tasks = _positive(values, "rollout.max_concurrent_rollouts", path)
    else:
        tasks = batch  # AReaL's WorkflowExecutor: `max_concurrent_rollouts or consumer_batch_size`
    for (work, task), group in members.items():
        if work == "train" and len(group) > group_size:
            problem = f"task {task} has {len(group)} sessions, n_samples is {group_size}"
            raise ForeignRunError(f"{group[-1].where}: task_id: {problem}")
    return {"group_size": group_size, "max_inflight": tasks * group_size}, []


def _positive(values: Mapping[str, int | None], key: str, path: Path) -> int:
    value = values[key]
    if value is None or value < 1:
        raise ForeignRunError(f"{path}: {key}: expected an integer >= 1, got {value}")
    return value


def _version_counts(samples: Any) -> dict[str, int]:
    """What the dumps say of versions: samples, and those whose tokens span versions."""
    samples = list(samples)
    spans = [s for s in samples if s.rle is not None and len({v for v, _ in s.rle}) > 1]
    return {
        "samples": len(samples),
        "with_version_rle": sum(s.rle is not None for s in samples),
        "spanning_versions": len(spans),
        "newest_tail_version": max((s.tail for s in samples), default=-1),
    }


def _arrive(rec: Recorder, now: float, session: Session, outcome: Outcome) -> None:
    episode = _episode_id(session)
    if session.status == "dropped":
        rec.cancel(now, _group_id((session.work, session.task)), [episode], reason="overload")
    elif isinstance(outcome, Sample):
        rec.complete(
            now,
            episode,
            reward=outcome.reward,
            prompt_tokens=outcome.prompt,
            completion_tokens=outcome.completion,
        )
    else:
        rec.fail(now, episode, error=outcome or session.reason)


def _score(
    rec: Recorder, now: float, members: list[Session], outcomes: dict[Session, Outcome]
) -> None:
    scored = [(m, o) for m, o in ((m, outcomes[m]) for m in members) if isinstance(o, Sample)]
    advantages = grpo_advantages([o.reward for _, o in scored])
    admitted = bool(scored) and members[0].work == "train"
    admitted = admitted and all(m.status == "accepted" for m, _ in scored)
    by_episode = {_episode_id(m): a for (m, _), a in zip(scored, advantages, strict=True)}
    rec.score(now, _group_id((members[0].work, members[0].task)), by_episode, admitted=admitted)
