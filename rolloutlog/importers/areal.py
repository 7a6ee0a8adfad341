"""Import an AReaL run: its session trace, its rollout dumps and, when there, its config.

A task is one group (AReaL's `GroupedRolloutWorkflow` runs the workflow `n_samples` times
and concatenates the trajectories that are not None), its sessions the members in
`session_id` order. A task of the `eval-rollout` engine is an eval group. What each file
holds is in `areal_files`; what the log can say of it, in docs/foreign-runs.md. Batches and
version times are in none of the files: `areal_trainer` reconstructs them as AReaL's
trainer makes them, and each session in flight at an update is interrupted and resumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from rolloutlog.core.presets_field import FIELD
from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.importers.areal_files import (
    Sample,
    Session,
    read_config,
    read_dumps,
    read_sessions,
)
from rolloutlog.importers.areal_trainer import (
    ASSUMED_BATCHES,
    ASSUMED_VERSIONS,
    Step,
    bounds,
    results,
    tokens_before,
    trainer_steps,
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
    "dropped sessions (a status AReaL 4aef98d never writes) are recorded as overload cancellations",
    "late arrivals: none are written, so a what-if's late_arrival_rate rests on --set",
)
UNCHECKED: Final = (
    "not checked: AReaL writes none of its decisions as it made them: dispatches are its "
    "sessions' submit times, batches and version times are reconstructed as its "
    "prepare_batch and trainer make them, advantages are computed here; what replay checks "
    "is AReaL's admission budget at each task's opening, on those versions"
)
ABSENT_BATCH: Final = "without config.yaml, rollout.consumer_batch_size is unknown"
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
    samples = {m: o for m, o in outcomes.items() if isinstance(o, Sample)}
    steps = _steps(config, members, samples, facts)
    versions = _version_counts(dumps.values())
    exact, interpolated = _version_facts(versions)
    note = {
        "source": "areal",
        "folder": str(root),
        "reconstructed": [*RECONSTRUCTED, *exact],
        "assumed": [*facts, *interpolated, *ASSUMED],
        "unchecked": UNCHECKED,
        "versions": versions,
        "steps": [{"step": s.step, "tasks": list(s.tasks)} for s in steps],
    }
    _record(output, _log_config(config), note, members, outcomes, steps)
    return note


def _steps(
    config: Mapping[str, int],
    members: dict[tuple[str, int], list[Session]],
    samples: dict[Session, Sample],
    facts: list[str],
) -> list[Step]:
    """The trainer's steps, where config.yaml gives the batch; refused where the samples
    hold a version no reconstructed step made."""
    if "consumer_batch_size" not in config:
        facts.append(f"no batch ships, no version is announced: {ABSENT_BATCH}")
        return []
    facts += [ASSUMED_BATCHES, ASSUMED_VERSIONS]
    origin = min(s.submit for group in members.values() for s in group)
    limits = bounds(members.values(), samples)
    steps = trainer_steps(results(members), config["consumer_batch_size"], origin, limits)
    for bound in limits:
        if bound.tail > len(steps):
            problem = f"{bound.tail}, but the results fill {len(steps)} batches"
            raise ForeignRunError(f"{bound.where}: tail_version: {problem} (prepare_batch)")
    return steps


def _log_config(config: Mapping[str, int]) -> dict[str, Any]:
    """The log's configuration: AReaL's preset keys, with its batch in episodes."""
    found: dict[str, Any] = {k: v for k, v in config.items() if k != "consumer_batch_size"}
    if "consumer_batch_size" in config:
        found["batch_size"] = config["consumer_batch_size"] * config["group_size"]
    return {**FIELD["areal"].keys, **found}


def _record(
    output: str | os.PathLike[str],
    config: Mapping[str, Any],
    note: dict[str, Any],
    members: dict[tuple[str, int], list[Session]],
    outcomes: dict[Session, Outcome],
    steps: list[Step],
) -> None:
    sessions = [s for group in members.values() for s in group]
    origin = min(s.submit for s in sessions)
    # (time, rank at that time, kind, what): dispatches, then arrivals, then each batch
    # before its version, and that version before the next batch
    timeline: list[tuple[float, int, int, Session | Step]] = []
    for session in sessions:
        timeline.append((session.submit, 0, DISPATCH, session))
        if session.end is not None:
            timeline.append((max(session.end, session.submit), 1, ARRIVAL, session))
    for step in steps:
        timeline.append((step.shipped, 2 * step.step, SHIP, step))
        timeline.append((step.announced, 2 * step.step + 1, UPDATE, step))
    last = max(t for t, *_ in timeline) - origin
    with Recorder(
        output, config=config, code_version=CODE_VERSION, overwrite=True,
        notes={IMPORT_NOTE: json.dumps(note)},
    ) as rec:  # fmt: skip
        run = _Run(rec, members, outcomes)
        for t, _, kind, what in sorted(timeline, key=lambda item: item[:2]):
            run.HANDLERS[kind](run, t - origin, what)
        rec.finish(last, reason="imported")


DISPATCH, ARRIVAL, SHIP, UPDATE = range(4)  # the kinds of the timeline, as `_Run.HANDLERS`


class _Run:
    """The recording of one imported run: what is in flight, which groups arrived whole."""

    def __init__(
        self,
        rec: Recorder,
        members: dict[tuple[str, int], list[Session]],
        outcomes: dict[Session, Outcome],
    ) -> None:
        self.rec, self.members, self.outcomes = rec, members, outcomes
        self.arrived: dict[tuple[str, int], int] = {}
        self.inflight: dict[Session, None] = {}  # in dispatch order

    def dispatch(self, now: float, session: Any) -> None:
        key = (session.work, session.task)
        if key not in self.arrived:
            self.arrived[key] = 0
            size, task = len(self.members[key]), str(session.task)
            self.rec.open_group(now, _group_id(key), env="areal", task=task, work=key[0], size=size)
        self.rec.dispatch(now, _group_id(key), _episode_id(session))
        self.inflight[session] = None

    def arrive(self, now: float, session: Any) -> None:
        key = (session.work, session.task)
        _arrive(self.rec, now, session, self.outcomes[session])
        del self.inflight[session]
        self.arrived[key] += 1
        if self.arrived[key] == len(self.members[key]):
            _score(self.rec, now, self.members[key], self.outcomes)

    def ship(self, now: float, step: Any) -> None:
        episodes = [
            _episode_id(m)
            for task in step.tasks
            for m in self.members[("train", task)]
            if isinstance(self.outcomes[m], Sample)
        ]
        self.rec.ship(now, episodes)

    def update(self, now: float, step: Any) -> None:
        """Version `step.step` is announced: the work in flight is interrupted with its
        tokens so far, and resumed under it once it is live."""
        self.rec.version_pending(now, step.step)
        for session in self.inflight:
            outcome = self.outcomes[session]
            sample = outcome if isinstance(outcome, Sample) else None
            tokens = tokens_before(session, sample, step.step, step.announced)
            self.rec.interrupt(now, _episode_id(session), completion_tokens=tokens)
        self.rec.version_live(now, step.step)
        for session in self.inflight:
            self.rec.resume(now, _episode_id(session), version=step.step)

    HANDLERS: Final = (dispatch, arrive, ship, update)


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
    eta = values["rollout.max_head_offpolicyness"]
    settings = {"group_size": group_size, "max_inflight": tasks * group_size}
    settings["consumer_batch_size"] = batch
    if eta is not None:
        settings["max_off_policy_steps"] = eta
    return settings, []


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


def _version_facts(counts: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """What of the samples' versions is exact (their own `version_rle`), and what is
    interpolated (the samples without it), as lines for the note and stderr."""
    exact = counts["with_version_rle"]
    rest = counts["samples"] - exact
    said = (
        [
            f"versions of {exact} of {counts['samples']} samples, exactly: each one's "
            "dispatch stamp is its own head_version and its tokens under each version are "
            "its version_rle"
        ]
        if exact
        else []
    )
    assumed = (
        [
            f"versions of {rest} of {counts['samples']} samples (no version_rle), "
            "interpolated: each one's dispatch stamp is the reconstructed version at its "
            "session's submission, bounded only by its task's head_version and "
            "tail_version (over the whole task, prompt tokens included); its tokens at an "
            "update are all of them where the task's tail_version is older, else its "
            "share of its generate time"
        ]
        if rest
        else []
    )
    return said, assumed


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
