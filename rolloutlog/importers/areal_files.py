"""AReaL's files, read field by field: its session trace, its rollout dumps, its config.

What AReaL (4aef98d; the areal 1.0.4 wheel) writes, and where:
- `SessionRecord.to_dict()` (areal/utils/perf_tracer.py), one line per session in
  `session_tracer/[{role}/]sessions-r{rank}.jsonl`: `task_id`, `session_id`, `role` (the
  engine's: `rollout`, `eval-rollout`), `status`, `reason`, `submit_ts`, `finalized_ts`,
  `phases` (`generate`, `reward`, `toolcall`: spans of `start_ts`, `end_ts`).
- `WorkflowExecutor._dump_trajectory` (areal/infra/workflow_executor.py), one line per
  sample in `{rollout|eval-rollout}/{version}/{task_id}.jsonl`: `sample_idx` (the row in
  the task's trajectory, which holds only the members that returned one), `seqlen`,
  `prompt_len`, `head_version`, `tail_version`, `reward`, and since AReaL PR #1350
  `version_rle` (`[[version, tokens], ...]` over the completion).
- `save_config` (areal/api/cli_args.py): config.yaml beside them, block YAML.
Anything missing or of the wrong type is refused in one line naming file, line and field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import attrs

from rolloutlog.importers.errors import ForeignRunError, field, read_jsonl

STATUSES: Final = ("pending", "accepted", "rejected", "failed", "dropped")
WORK_OF_ROLE: Final = {"rollout": "train", "eval-rollout": "eval"}
CONFIG_KEYS: Final = (
    "gconfig.n_samples",
    "rollout.max_concurrent_rollouts",
    "rollout.consumer_batch_size",
    "rollout.max_head_offpolicyness",
)


@attrs.frozen
class Session:
    """One session (one member of a task's group) as the tracer flushed it."""

    work: str  # train, eval
    task: int
    session: int
    status: str
    reason: str
    submit: float
    end: float | None  # its last phase's end, else finalized_ts; None: still pending
    scored: bool  # its reward phase ended: its workflow got as far as a sample
    generated: tuple[float, float] | None  # its generate phases' first start and last end
    where: str


@attrs.frozen
class Sample:
    """One row of a rollout dump."""

    reward: float
    prompt: int
    completion: int
    head: int
    tail: int
    rle: tuple[tuple[int, int], ...] | None  # None: a dump from before PR #1350
    where: str


def read_sessions(path: Path) -> list[Session]:
    """Every session of one trace file; the role comes from the record, else the folder."""
    found = []
    folder_role = path.parent.name if path.parent.name in WORK_OF_ROLE else "rollout"
    for line, record in read_jsonl(path):
        where = f"{path}: line {line}"
        status = field(record, "status", str, where)
        if status not in STATUSES:
            raise ForeignRunError(f"{where}: status: expected one of {STATUSES}, got {status!r}")
        role = _optional(record, "role", str, where) or folder_role
        if role not in WORK_OF_ROLE:
            raise ForeignRunError(f"{where}: role: expected one of {tuple(WORK_OF_ROLE)}")
        spans = _phases(record, where)
        ends = [end for _, _, end in spans if end is not None]
        finalized = _optional(record, "finalized_ts", float, where)
        end = max(ends) if ends else finalized
        if status != "pending" and end is None:
            raise ForeignRunError(f"{where}: finalized_ts: missing, and no phase has an end_ts")
        found.append(
            Session(
                work=WORK_OF_ROLE[role],
                task=field(record, "task_id", int, where),
                session=field(record, "session_id", int, where),
                status=status,
                reason=_optional(record, "reason", str, where) or status,
                submit=field(record, "submit_ts", float, where),
                end=None if status == "pending" else end,
                scored=any(name == "reward" and e is not None for name, _, e in spans),
                generated=_generated(spans),
                where=where,
            )
        )
    return found


def _phases(record: dict[str, Any], where: str) -> list[tuple[str, float, float | None]]:
    """(phase name, start_ts, end_ts or None) of every span in `phases`."""
    phases = _optional(record, "phases", dict, where) or {}
    found = []
    for name, spans in phases.items():
        if not isinstance(spans, list):
            raise ForeignRunError(f"{where}: phases.{name}: expected an array")
        for n, span in enumerate(spans):
            at = f"{where}: phases.{name}[{n}]"
            start = field(span, "start_ts", float, at)
            found.append((name, start, _optional(span, "end_ts", float, at)))
    return found


def _generated(spans: list[tuple[str, float, float | None]]) -> tuple[float, float] | None:
    """From the first generate span's start to the last one's end; None if none ended."""
    generate = [(start, end) for name, start, end in spans if name == "generate"]
    ends = [end for _, end in generate if end is not None]
    return (min(start for start, _ in generate), max(ends)) if ends else None


def _optional(record: dict[str, Any], name: str, kind: type, where: str) -> Any:
    """`record[name]` of `kind`, or None where it is absent or null (AReaL omits Nones)."""
    if record.get(name) is None:
        return None
    return field(record, name, kind, where)


def dump_files(root: Path) -> list[tuple[str, int, Path]]:
    """(work, the folder's version, path) of every `{rollout|eval-rollout}/{v}/{task}.jsonl`."""
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        kind = path.parent.parent.name
        if kind in WORK_OF_ROLE and path.stem.isdigit() and path.parent.name.isdigit():
            found.append((WORK_OF_ROLE[kind], int(path.parent.name), path))
    return found


def read_dumps(root: Path) -> dict[tuple[str, int, int], Sample]:
    """(work, task_id, sample_idx) -> the dumped sample, each key once."""
    dumps: dict[tuple[str, int, int], Sample] = {}
    for work, version, path in dump_files(root):
        for line, record in read_jsonl(path):
            where = f"{path}: line {line}"
            key = (work, field(record, "task_id", int, where))
            key3 = (*key, field(record, "sample_idx", int, where))
            if key3 in dumps:
                raise ForeignRunError(
                    f"{where}: sample_idx: sample {key3[2]} of task {key[1]} is also at "
                    f"{dumps[key3].where}"
                )
            dumps[key3] = _sample(record, version, where)
    return dumps


def _sample(record: dict[str, Any], version: int, where: str) -> Sample:
    prompt = field(record, "prompt_len", int, where)
    completion = field(record, "seqlen", int, where) - prompt
    if prompt < 0 or completion < 0:
        raise ForeignRunError(f"{where}: seqlen: {prompt + completion} is below prompt_len")
    head = field(record, "head_version", int, where)
    tail = field(record, "tail_version", int, where)
    if not head <= tail <= version:
        problem = f"expected head_version <= tail_version <= {version} (its folder)"
        raise ForeignRunError(f"{where}: tail_version: {problem}, got {head} and {tail}")
    rle = _version_rle(record, where)
    if rle is not None:
        _check_rle(rle, head, tail, completion, where)
    return Sample(
        reward=field(record, "reward", float, where),
        prompt=prompt,
        completion=completion,
        head=head,
        tail=tail,
        rle=rle,
        where=where,
    )


def _version_rle(record: dict[str, Any], where: str) -> tuple[tuple[int, int], ...] | None:
    if "version_rle" not in record:
        return None
    runs = field(record, "version_rle", list, where)
    for run in runs:
        if not (
            isinstance(run, list)
            and len(run) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in run)
            and run[1] > 0
        ):
            raise ForeignRunError(
                f"{where}: version_rle: expected [version, tokens] pairs, got {run!r:.40}"
            )
    return tuple((run[0], run[1]) for run in runs)


def _check_rle(
    rle: tuple[tuple[int, int], ...], head: int, tail: int, completion: int, where: str
) -> None:
    """PR #1350's runs cover the completion, and its head and tail are their ends."""
    tokens = sum(n for _, n in rle)
    if tokens != completion:
        raise ForeignRunError(
            f"{where}: version_rle: {tokens} tokens, but seqlen - prompt_len is {completion}"
        )
    versions = [v for v, _ in rle]
    if rle and (min(versions), max(versions)) != (head, tail):
        raise ForeignRunError(
            f"{where}: version_rle: versions {min(versions)}..{max(versions)}, but "
            f"head_version..tail_version is {head}..{tail}"
        )


_KEY = re.compile(r"^( *)([A-Za-z_][\w-]*):(?: (.*))?$")


def read_config(path: Path) -> dict[str, int | None]:
    """CONFIG_KEYS from the block YAML that AReaL's `save_config` writes (`yaml.dump`,
    `default_flow_style=False`): each an integer, or null; a key missing is refused."""
    stack: list[tuple[int, str]] = []
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _KEY.match(line)
        if match is None:
            continue
        indent, key, value = len(match[1]), match[2], (match[3] or "").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        values[".".join(k for _, k in stack)] = value
    found: dict[str, int | None] = {}
    for key in CONFIG_KEYS:
        if key not in values:
            raise ForeignRunError(f"{path}: {key}: missing")
        text = values[key]
        if text in ("null", "~"):
            found[key] = None
        elif re.fullmatch(r"-?\d+", text):
            found[key] = int(text)
        else:
            raise ForeignRunError(f"{path}: {key}: expected an integer or null, got {text!r:.40}")
    return found
