"""The columnar fold: replay straight from a log's record batches, one column list at a time.

Back of the envelope (docs/replay.md): `pyarrow.Table.to_pylist()` spends ~13 µs per event
of this 32-column schema building one dict per row. The plain fold spends ~6 µs building
an event object and ~18 µs folding it (two deciders, the account, a digest). Here each
batch is decoded once per column (~1 µs per event), checked per column against the event
rules, and each row's values are fed to the shadow account (`core.account`, the same one
the plain fold feeds) and hashed into the same digest chain, with no object per event. The
deciders are not run: on a consistent log the account's fingerprint equals theirs.

It must agree with `fold.LogFold` exactly: the same digests (the canonical bytes of a row
are the canonical bytes of its event, `core.digest.canonical_values`), the same summary,
the same verdict. It words no problem itself: at the first row the account flags (any
broken property, or anything the deciders would refuse) it raises `NeedsPlainFold`, and
`replay_log` folds the log on the plain path, which words the error or the violations.
Refusing more than the plain fold would is allowed (only slower); refusing less is a bug,
which the equivalence suite (`testing.equivalence`) hunts for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pyarrow as pa

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.digest import DIGEST_SIZE, GENESIS, canonical_values
from rolloutlog.events.schema import PAYLOAD_FIELDS, batch_columns
from rolloutlog.events.types import WORLD_KINDS
from rolloutlog.replay.chain import DigestChain
from rolloutlog.replay.columnar_validate import batch_is_valid

Columns = dict[str, list[Any]]


class NeedsPlainFold(Exception):  # a signal to `replay_log`, not a failure
    """The columnar fold met a row it does not vouch for; fold the log on the plain path."""

    def __init__(self, seq: int, why: str) -> None:
        super().__init__(f"seq {seq}: {why}")
        self.seq = seq
        self.why = why


# A row applier applies row `i` to the state and returns the row's canonical text: exactly
# `repr((kind, seq, t, *values))`, the text `core.digest.canonical_values` encodes. Hot
# kinds write it with an f-string (`!r` is `repr`; `str` of an int or bool is its repr),
# which is faster than building the tuple; `t_text` is `repr(t)`, shared by all the rows
# a world event sets off.
Applier = Callable[[Account, Columns, int, int, str], str]


def _generic(kind: str) -> Applier:
    """Rows that only set a value or nothing: their text comes from `canonical_values`."""
    names = PAYLOAD_FIELDS[kind]

    def apply(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
        return canonical_values(kind, seq, c["t"][i], [c[name][i] for name in names]).decode()

    return apply


def _group_opened(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    group_id, work, size = c["group_id"][i], c["work"][i], c["group_size"][i]
    frozen = c["frozen"][i]
    version, step = c["policy_version"][i], c["step"][i]
    state.on_group_opened(seq, group_id, work, size, frozen, version, step)
    return (
        f"('group_opened', {seq}, {t_text}, {group_id!r}, {work!r}, {c['env'][i]!r}, "
        f"{c['task_id'][i]!r}, {size}, {version}, {step}, {frozen})"
    )


def _dispatched(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    episode_id, group_id = c["episode_id"][i], c["group_id"][i]
    member, version = c["member"][i], c["policy_version"][i]
    state.on_dispatched(seq, episode_id, group_id, member, version)
    return (
        f"('episode_dispatched', {seq}, {t_text}, {episode_id!r}, {group_id!r}, "
        f"{member}, {version})"
    )


def _completed(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    episode_id, reward = c["episode_id"][i], c["reward"][i]
    if reward is None:
        raise NeedsPlainFold(seq, "a completion without a reward")
    state.on_arrival(seq, "episode_completed", episode_id, reward)
    return (
        f"('episode_completed', {seq}, {t_text}, {episode_id!r}, {reward!r}, "
        f"{c['prompt_tokens'][i]}, {c['completion_tokens'][i]})"
    )


def _failed(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    episode_id = c["episode_id"][i]
    state.on_arrival(seq, "episode_failed", episode_id, None)
    return f"('episode_failed', {seq}, {t_text}, {episode_id!r}, {c['error'][i]!r})"


def _group_ids(kind: str, method: Callable[[Account, int, str, Any, Any, Any], None]) -> Applier:
    """Rows of a group's id list and two more values (`episodes_cancelled`, `group_scored`),
    applied by `method` in field order; a list value's text is its tuple's."""
    group_field, ids_field, third_field, fourth_field = PAYLOAD_FIELDS[kind]

    def apply(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
        group_id, ids = c[group_field][i], c[ids_field][i]
        third, fourth = c[third_field][i], c[fourth_field][i]
        method(state, seq, group_id, ids, third, fourth)
        third_text = repr(tuple(third) if type(third) is list else third)
        return (
            f"({kind!r}, {seq}, {t_text}, {group_id!r}, {tuple(ids)!r}, {third_text}, {fourth!r})"
        )

    return apply


def _dropped(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    episode_id, reason, age = c["episode_id"][i], c["reason"][i], c["age"][i]
    state.on_dropped(seq, episode_id, reason, age)
    return f"('episode_dropped', {seq}, {t_text}, {episode_id!r}, {reason!r}, {age})"


def _shipped(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    step, ids, trained = c["step"][i], c["episode_ids"][i], c["trained_ids"][i]
    state.on_shipped(seq, step, ids, trained)
    return (
        f"('batch_shipped', {seq}, {t_text}, {step}, {tuple(ids)!r}, {tuple(trained)!r}, "
        f"{c['tokens'][i]})"
    )


def _setting(kind: str, field: str, setter: Callable[[Account, Any], None]) -> Applier:
    text = _generic(kind)

    def apply(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
        setter(state, c[field][i])
        return text(state, c, i, seq, t_text)

    return apply


def _run_started(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    if seq != 0:  # validate_event refuses it; the plain path reports the EventError
        raise NeedsPlainFold(seq, "run_started after seq 0")
    return _OPENING(state, c, i, seq, t_text)


def _run_resumed(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    state.on_resumed(seq, c["episode_ids"][i], c["version"][i])
    return _RESUMED(state, c, i, seq, t_text)


def _version_pending(state: Account, c: Columns, i: int, seq: int, t_text: str) -> str:
    state.on_version_pending(seq, c["version"][i])
    return _PENDING(state, c, i, seq, t_text)


_OPENING: Final = _generic("run_started")
_RESUMED: Final = _generic("run_resumed")
_PENDING: Final = _generic("version_pending")
_APPLIERS: Final[dict[str, Applier]] = {
    "run_started": _run_started,
    "group_opened": _group_opened,
    "episode_dispatched": _dispatched,
    "episode_completed": _completed,
    "episode_failed": _failed,
    "episodes_cancelled": _group_ids("episodes_cancelled", Account.on_cancelled),
    "version_pending": _version_pending,
    "version_live": _generic("version_live"),
    "limit_set": _setting("limit_set", "max_inflight", Account.on_limit_set),
    "overload_cut": _generic("overload_cut"),
    "episode_dropped": _dropped,
    "group_scored": _group_ids("group_scored", Account.on_scored),
    "batch_shipped": _shipped,
    "run_finished": _setting("run_finished", "reason", Account.on_run_finished),
    "run_resumed": _run_resumed,
}
# World kinds whose reactions the checker examines once they have settled.
_SETTLED_KINDS: Final = frozenset({"version_pending", "run_finished", "run_resumed"})
if set(_APPLIERS) != set(PAYLOAD_FIELDS):
    raise ImportError("columnar fold: every event kind needs a row applier")


class ColumnarFold:
    """Folds record batches into the digest chain and the run summary, without events."""

    def __init__(self, config: RunConfig, *, keep_digests: bool = False) -> None:
        self.config = config
        self.state = Account(config)  # raises at the first problem: the plain fold words it
        self.digest = GENESIS
        self.digests: DigestChain | None = DigestChain() if keep_digests else None
        self.next_seq = 0
        self._last_world: str | None = None

    @classmethod
    def from_first_batch(cls, batch: pa.RecordBatch, **options: Any) -> ColumnarFold:
        """A fold configured by the `run_started` that opens the log."""
        if batch.num_rows == 0 or batch.column("kind")[0].as_py() != "run_started":
            raise NeedsPlainFold(0, "the log does not open with run_started")
        config = batch_columns(batch.slice(0, 1))["config"][0]
        try:
            return cls(RunConfig.from_mapping(config, where="run_started.config"), **options)
        except (ConfigError, TypeError) as error:
            raise NeedsPlainFold(0, f"unusable config ({error})") from error

    def apply_batch(self, batch: pa.RecordBatch) -> None:
        """Fold one record batch; raises `NeedsPlainFold` at a row it does not vouch for."""
        first = self.next_seq
        seqs = batch.column("seq").to_numpy()
        if not np.array_equal(seqs, np.arange(first, first + len(seqs))):
            raise NeedsPlainFold(first, "seqs do not continue the log gap-free")
        if not batch_is_valid(batch):
            raise NeedsPlainFold(first, "a value breaks the event rules")
        columns = batch_columns(batch)
        try:
            self._fold_rows(columns, first)
        except InvariantViolation as problem:
            raise NeedsPlainFold(first, str(problem)) from problem
        self.state.count_kinds(columns["kind"], len(seqs))
        self.next_seq = first + len(seqs)

    def _fold_rows(self, columns: Columns, first: int) -> None:
        """The hot loop: one applier call, two short texts and one hash per row."""
        state, appliers, digests = self.state, _APPLIERS, self.digests
        new_hash = hashlib.blake2b
        digest, last_world = self.digest, self._last_world
        last_t, t_text = -1.0, ""
        for i, (kind, t) in enumerate(zip(columns["kind"], columns["t"], strict=True)):
            seq = first + i
            if kind in WORLD_KINDS:
                if last_world in _SETTLED_KINDS:
                    state.settle(seq, last_world)
                last_world = kind
            if t != last_t or not t:  # zero: 0.0 and -0.0 are equal but print apart
                last_t, t_text = t, repr(t)
            row = appliers[kind](state, columns, i, seq, t_text)
            inflight = len(state.inflight)
            fingerprint = (
                f"{state.fingerprint_head}{inflight}, {state.owing_groups}"
                f"{state.fingerprint_middle}{len(state.queue)}, {len(state.groups)}, {inflight})"
            )
            text = (row + fingerprint).encode()
            digest = new_hash(digest + text, digest_size=DIGEST_SIZE).digest()
            if digests is not None:
                digests.append(digest)
        self.digest, self._last_world = digest, last_world

    def finish(self) -> None:
        """The log ended: settle the last world event's checks."""
        if self._last_world is not None:
            try:
                self.state.settle(self.next_seq, self._last_world)
            except InvariantViolation as problem:
                raise NeedsPlainFold(self.next_seq, str(problem)) from problem
            self._last_world = None

    def summary(self) -> dict[str, Any]:
        """The `replay --json` object; a fold that finished here found no violation."""
        return self.state.summary()
