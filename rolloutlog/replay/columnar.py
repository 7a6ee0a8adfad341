"""The columnar fold: replay straight from a log's record batches, one column list at a time.

Back of the envelope: `pyarrow.Table.to_pylist()` spends ~13 µs per event
of this 32-column schema building one dict per row. The plain fold spends ~6 µs building
an event object and ~18 µs folding it (two deciders, the account, a digest). Here each
batch is decoded once per column (~1 µs per event), checked per column against the event
rules, and each row's values are fed to the shadow account (`core.account`, the same one
the plain fold feeds) and hashed into the same digest chain, with no object per event. The
deciders are not run: the row's canonical text (`core.digest.canonical`) and the state
fingerprint (`ReactionLoop.fingerprint`) are written here from the columns (`Digested`),
with the sizes of what is open (in flight, queued, groups) from the account, which keeps
them for its own checks; on a consistent log they equal the deciders'.

It must agree with `fold.LogFold` exactly: the same digests (the canonical bytes of a row
are the canonical bytes of its event, `core.digest.canonical_values`), the same summary,
the same verdict. It words no problem of the account's itself: at the first row the
account flags (any broken property, or anything the deciders would refuse) it raises
`NeedsPlainFold`, and `replay_log` folds the log on the plain path, which words the error
or the violations. Only `t` going back, which no decider reads, it reports as the plain
fold does (`time_order`, fed each batch's `t` column).
Refusing more than the plain fold would is allowed (only slower); refusing less is a bug,
which the equivalence suite (`testing.equivalence`) hunts for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pyarrow as pa

from rolloutlog.core.account import Account, Group, InvariantViolation
from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.digest import DIGEST_SIZE, GENESIS, canonical_values
from rolloutlog.events.schema import PAYLOAD_FIELDS, batch_columns
from rolloutlog.events.types import WORLD_KINDS
from rolloutlog.replay.chain import DigestChain
from rolloutlog.replay.columnar_validate import batch_is_valid
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.replay.time_order import TimeOrder

Texts = list[tuple[str, str]]  # each row's canonical text and the fingerprint text after it


class NeedsPlainFold(Exception):  # a signal to `replay_log`, not a failure
    """The columnar fold met a row it does not vouch for; fold the log on the plain path."""

    def __init__(self, seq: int, why: str) -> None:
        super().__init__(f"seq {seq}: {why}")
        self.seq = seq
        self.why = why


class CountTexts(dict[int, str]):
    """`str` of each count met so far. Formatting an int in an f-string costs about three
    times a dict hit, and every row's fingerprint formats four counts. Only values bounded
    by the run's config go in (in flight, queued, open groups, members, drop ages), so the
    table stays small however long the log."""

    def __missing__(self, count: int) -> str:
        text = self[count] = str(count)
        return text


class Digested:
    """The account the rows feed, and what the digest's fingerprint needs besides it: the
    step, version and limit (as the text they make in `repr(fingerprint)`, so that a row's
    fingerprint is one f-string, not a tuple) and the groups that still owe a member."""

    __slots__ = (
        "account",
        "counts",
        "head",
        "limit",
        "middle",
        "owing",
        "split",
        "step",
        "version",
    )

    def __init__(self, account: Account, limit: int, split: StepMetrics | None) -> None:
        self.account = account
        self.split = split  # the age split, fed each row's values as the account is
        self.step, self.version, self.limit = 1, 0, limit
        self.owing = 0  # the dispatcher's open groups: in-flight or unscheduled members
        self.counts = CountTexts()  # for the fingerprint, members and drop ages
        self.head, self.middle = "", ""
        self.moved()

    def moved(self) -> None:
        """Step, version or limit changed: rewrite the texts they make."""
        self.head = f"({self.step}, {self.version}, {self.limit}, "
        self.middle = f", {self.step}, {self.version}, "

    def landed(self, group: Group | None) -> None:
        """An arrival or a cancellation touched `group`: it may owe nothing now."""
        if group is not None and not group.owes:
            self.owing -= 1


# A row applier applies one row to the state and returns the row's canonical text: exactly
# `repr((kind, seq, t, *values))`, the text `core.digest.canonical_values` encodes, with
# `values` the row's payload in field order (`PAYLOAD_FIELDS`). Hot kinds write it with an
# f-string (`!r` is `repr`; `str` of an int or bool is its repr), which is faster than
# building the tuple; `t_text` is `repr(t)`, shared by all the rows a world event sets off.
Values = tuple[Any, ...]
Applier = Callable[[Digested, int, float, str, Values], str]


def _generic(kind: str) -> Applier:
    """Rows that only set a value or nothing: their text comes from `canonical_values`."""

    def apply(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
        return canonical_values(kind, seq, t, values).decode()

    return apply


def _group_opened(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    group_id, work, env, task_id, size, version, step, frozen = values
    state.account.on_group_opened(seq, group_id, work, size, frozen, version, step, (task_id, env))
    state.owing += 1
    if state.split is not None:
        state.split.on_group_opened(work, group_id)
    return (
        f"('group_opened', {seq}, {t_text}, {group_id!r}, {work!r}, {env!r}, "
        f"{task_id!r}, {size}, {version}, {step}, {frozen})"
    )


def _dispatched(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    episode_id, group_id, member, version = values
    state.account.on_dispatched(seq, episode_id, group_id, member, version)
    if state.split is not None:
        state.split.on_dispatched(group_id, episode_id, version)
    # a member is below the group size: its text is in the table of counts
    return (
        f"('episode_dispatched', {seq}, {t_text}, {episode_id!r}, {group_id!r}, "
        f"{state.counts[member]}, {version})"
    )


def _completed(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    episode_id, reward, prompt, completion = values
    if reward is None:
        raise NeedsPlainFold(seq, "a completion without a reward")
    kind = "episode_completed"
    state.landed(state.account.on_arrival(seq, kind, episode_id, reward, prompt + completion))
    if state.split is not None:
        state.split.on_completed(episode_id, reward)
    return (
        f"('episode_completed', {seq}, {t_text}, {episode_id!r}, {reward!r}, "
        f"{prompt}, {completion})"
    )


def _failed(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    episode_id, error = values
    state.landed(state.account.on_arrival(seq, "episode_failed", episode_id, None))
    if state.split is not None:
        state.split.on_failed(episode_id)
    return f"('episode_failed', {seq}, {t_text}, {episode_id!r}, {error!r})"


def _cancelled(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    group_id, ids, unscheduled, reason = values
    account = state.account
    account.on_cancelled(seq, group_id, ids, unscheduled, reason)
    state.landed(account.groups.get(group_id))
    if state.split is not None:
        state.split.on_cancelled(ids, reason)
    return (
        f"('episodes_cancelled', {seq}, {t_text}, {group_id!r}, {tuple(ids)!r}, "
        f"{unscheduled}, {reason!r})"
    )


def _scored(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    group_id, ids, scored, admitted = values
    state.account.on_scored(seq, group_id, ids, scored, admitted)
    if state.split is not None:
        state.split.on_scored(group_id, ids, admitted)
    return (
        f"('group_scored', {seq}, {t_text}, {group_id!r}, {tuple(ids)!r}, "
        f"{tuple(scored)!r}, {admitted})"
    )


def _dropped(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    episode_id, reason, age = values
    state.account.on_dropped(seq, episode_id, reason, age)
    if state.split is not None:
        state.split.on_dropped(episode_id, reason)
    return f"('episode_dropped', {seq}, {t_text}, {episode_id!r}, {reason!r}, {state.counts[age]})"


def _shipped(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    step, ids, trained, tokens, masked = values
    if masked or state.account.checks.masks:  # the account reads each arrival's segments
        raise NeedsPlainFold(seq, "masked tokens are checked on the plain path")
    state.account.on_shipped(seq, step, ids, trained, tokens)
    if state.split is not None:
        state.split.on_shipped(t, step, ids, trained)
    state.step = step + 1
    state.moved()
    return (
        f"('batch_shipped', {seq}, {t_text}, {step}, {tuple(ids)!r}, {tuple(trained)!r}, "
        f"{tokens}, {masked})"
    )


def _run_started(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    if seq != 0:  # validate_event refuses it; the plain path reports the EventError
        raise NeedsPlainFold(seq, "run_started after seq 0")
    return _OPENING(state, seq, t, t_text, values)


def _run_resumed(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    _, ids, version = values
    state.account.on_resumed(seq, ids, version)
    return _RESUMED(state, seq, t, t_text, values)


def _partial(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    raise NeedsPlainFold(seq, "interrupted and resumed episodes are folded on the plain path")


def _version_pending(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    (version,) = values
    state.account.on_version_pending(seq, version)
    if state.split is not None:
        state.split.on_version_pending()
    state.version = version
    state.moved()
    return _PENDING(state, seq, t, t_text, values)


def _version_live(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    state.account.on_live(seq, values[0])  # the version served: `update_pause` reads it
    if state.split is not None:
        state.split.on_version_live(values[0])
    return _LIVE(state, seq, t, t_text, values)


def _limit_set(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    (limit,) = values
    state.account.on_limit_set(limit)
    state.limit = limit
    state.moved()
    return _LIMIT(state, seq, t, t_text, values)


def _run_finished(state: Digested, seq: int, t: float, t_text: str, values: Values) -> str:
    state.account.on_run_finished(values[0])
    return _FINISHED(state, seq, t, t_text, values)


_EMPTY_HASH: Final = hashlib.blake2b(digest_size=DIGEST_SIZE)  # `core.digest.chain`'s
_OPENING: Final = _generic("run_started")
_RESUMED: Final = _generic("run_resumed")
_PENDING: Final = _generic("version_pending")
_LIMIT: Final = _generic("limit_set")
_LIVE: Final = _generic("version_live")
_FINISHED: Final = _generic("run_finished")
_APPLIERS: Final[dict[str, Applier]] = {
    "run_started": _run_started,
    "group_opened": _group_opened,
    "episode_dispatched": _dispatched,
    "episode_completed": _completed,
    "episode_failed": _failed,
    "episodes_cancelled": _cancelled,
    "version_pending": _version_pending,
    "version_live": _version_live,
    "limit_set": _limit_set,
    "overload_cut": _generic("overload_cut"),
    "episode_dropped": _dropped,
    "group_scored": _scored,
    "batch_shipped": _shipped,
    "run_finished": _run_finished,
    "run_resumed": _run_resumed,
    "episode_interrupted": _partial,
    "episode_resumed": _partial,
}
# World kinds whose reactions the checker examines once they have settled. Any world event
# settles too while a group that reached G still owes members (`redundant_due`): that check
# holds only at the world event it is due at, not at a later settled point.
_SETTLED_KINDS: Final = frozenset({"version_pending", "run_finished", "run_resumed"})
if set(_APPLIERS) != set(PAYLOAD_FIELDS):
    raise ImportError("columnar fold: every event kind needs a row applier")


class Decoded:
    """One batch decoded for the row loop: its `kind` and `t` columns, and per kind a
    source of its rows' payloads in row order (the kind's fields only, taken from the rows
    of that kind: no cell of another kind's field is decoded, and a row's values are one
    tuple, not one column lookup each)."""

    __slots__ = ("kinds", "next_values", "times")

    def __init__(self, batch: pa.RecordBatch) -> None:
        kind_column = batch.column("kind")
        labels = kind_column.dictionary.to_pylist()
        codes = kind_column.indices.to_numpy()
        self.kinds: list[str] = [labels[code] for code in codes.tolist()]
        self.times: list[float] = batch.column("t").to_pylist()
        self.next_values: dict[str, Callable[[], Values]] = {}
        for code in np.unique(codes).tolist():
            names = PAYLOAD_FIELDS[labels[code]]
            rows = batch.select(names).take(pa.array(np.flatnonzero(codes == code)))
            columns = batch_columns(rows)
            values = zip(*(columns[name] for name in names), strict=True)
            self.next_values[labels[code]] = values.__next__


class ColumnarFold:
    """Folds record batches into the digest chain and the run summary, without events."""

    def __init__(
        self, config: RunConfig, *, keep_digests: bool = False, age_split: bool = False
    ) -> None:
        if config.weight_update != "freeze":  # property 13 is checked on the plain path
            raise NeedsPlainFold(0, f"weight_update {config.weight_update!r} folds plainly")
        if config.recycle:  # and its segments, which the token age split reads
            raise NeedsPlainFold(0, "recycle folds plainly")
        self.config = config
        # The age split read from the same columns, not from a second pass over the log.
        self.age_split = StepMetrics(keep_rows=False) if age_split else None
        self.state = Account(config)  # raises at the first problem: the plain fold words it
        self.digested = Digested(self.state, config.max_inflight, self.age_split)
        self.digest = GENESIS
        self.digests: DigestChain | None = DigestChain() if keep_digests else None
        self.next_seq = 0
        self.time_order = TimeOrder()  # `t` never goes back: read from each batch's column
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

    def apply_batch(self, batch: pa.RecordBatch, *, texts: Texts | None = None) -> None:
        """Fold one record batch; raises `NeedsPlainFold` at a row it does not vouch for.

        `texts` collects each row's canonical text and the fingerprint text after it (what
        the row's digest covers), for comparing them with `core.digest`'s definitions.
        """
        first = self.next_seq
        seqs = batch.column("seq").to_numpy()
        if not np.array_equal(seqs, np.arange(first, first + len(seqs))):
            raise NeedsPlainFold(first, "seqs do not continue the log gap-free")
        if not batch_is_valid(batch):
            raise NeedsPlainFold(first, "a value breaks the event rules")
        decoded = Decoded(batch)
        try:
            self._fold_rows(decoded, first, texts)
        except InvariantViolation as problem:
            raise NeedsPlainFold(first, str(problem)) from problem
        self.state.run.count_kinds(decoded.kinds, len(seqs))
        times = batch.column("t").to_numpy(zero_copy_only=False)
        self.time_order.batch(first, times, decoded.kinds)
        self.next_seq = first + len(seqs)

    def _fold_rows(self, decoded: Decoded, first: int, texts: Texts | None) -> None:
        """The hot loop: one applier call, two short texts and one hash per row."""
        state, digested, appliers, digests = self.state, self.digested, _APPLIERS, self.digests
        inflight_ids, queue, groups = state.inflight, state.queue, state.groups
        redundant_due = state.checks.redundancy.due  # groups due a redundant cancellation
        count_text, new_hash = digested.counts, _EMPTY_HASH.copy  # copying beats building
        digest, last_world = self.digest, self._last_world
        # per kind in the batch, one lookup a row: its applier, its rows' values, whether
        # it is a world event
        rows = {
            kind: (appliers[kind], next_values, kind in WORLD_KINDS)
            for kind, next_values in decoded.next_values.items()
        }
        last_t, t_text, seq = -1.0, "", first - 1
        for kind, t in zip(decoded.kinds, decoded.times, strict=True):
            seq += 1
            apply, next_values, world = rows[kind]
            if world:
                if last_world is not None and (last_world in _SETTLED_KINDS or redundant_due):
                    state.settle(seq, last_world)
                last_world = kind
            state.now = t  # the row's own time, as the plain fold reads it: a damaged log's
            # reaction may carry a time other than its world event's
            if t != last_t or not t:  # zero: 0.0 and -0.0 are equal but print apart
                last_t, t_text = t, repr(t)
            row = apply(digested, seq, t, t_text, next_values())
            inflight = count_text[len(inflight_ids)]  # `repr(ReactionLoop.fingerprint())`
            fingerprint = (
                f"{digested.head}{inflight}, {count_text[digested.owing]}"
                f"{digested.middle}{count_text[len(queue)]}, {count_text[len(groups)]}, "
                f"{inflight})"
            )
            if texts is not None:
                texts.append((row, fingerprint))
            hasher = new_hash()
            hasher.update(digest + (row + fingerprint).encode())
            digest = hasher.digest()
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
        """The `replay --json` object; a fold that finished here found no violation of
        the account's (only `t` going back, which it does not hand over for)."""
        return self.time_order.listed(self.state.summary())
