"""A recorded run's world as data: the `[trace]` table of a scenario file.

A `Trace` holds what a log says about the world, nothing the deciders decided: each
dispatched episode's outcome (generation seconds to its completion or failure, reward,
prompt and completion tokens), the trainer's time for each batch and each weight update,
and the controller's `limit_set` / `overload_cut` events at their recorded times. It is
written as column tables and read back with every bad column and value refused by name;
`runtime.sim.trace_world` plans a simulation from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from rolloutlog.core.config import ConfigError

Outcome = Literal["completed", "failed", "censored"]
OUTCOMES: tuple[Outcome, ...] = ("completed", "failed", "censored")
# The [world] keys a trace world reads (the batch times only when no batch was recorded);
# the rest of a saved world's [world] table is recorded medians and means, for reading.
TRACE_WORLD_KEYS = frozenset(
    {
        "pause_inference_on_update",
        "late_arrival_rate",
        "version_skip_rate",
        "train_step_s",
        "weight_update_s",
        "prefill_tokens_per_s",  # what resuming costs, under `weight_update = interrupt`
    }
)
# With `inference = "shared"` (a world `whatif` fitted), durations come from the servers
# and batch times from the trainer's knobs, so these are read too.
SHARED_TRACE_WORLD_KEYS = TRACE_WORLD_KEYS | {
    "inference",
    "inference_servers",
    "decode_step_s",
    "decode_s_per_seq",
    "decode_compute_s_per_seq",
    "request_steps",
    "max_running",
    "kv_capacity_tokens",
    "prefix_caching",
    "episode_overhead_s",
    "train_s_per_episode",
    "train_s_per_token",
    "trainer_jitter",
    "colocated",
    "colocation_coupling",
}


@attrs.frozen(kw_only=True)
class RecordedEpisode:
    """One dispatched episode as the log tells it.

    `seconds` is generation time (weight-update pauses excluded) to the outcome, or, when
    `outcome` is `censored`, until its cancellation. `late`: it arrived after being cancelled.
    `watched_s`: for a cancelled episode, the generation seconds the log went on after the
    cancellation; an abort that lost its race shows only if the episode came due within them
    (at shutdown, none can). `inf` for an episode never cancelled.
    """

    episode_id: str
    task_id: str
    outcome: Outcome
    seconds: float
    late: bool = False
    watched_s: float = math.inf
    reward: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@attrs.frozen(kw_only=True)
class RecordedBatch:
    """Batch `step`: trainer seconds, then weight-update seconds (0 when `skipped`)."""

    step: int
    train_s: float
    update_s: float
    skipped: bool = False


@attrs.frozen(kw_only=True)
class RecordedControl:
    """A controller event at its recorded time: `limit` (a new limit) or `overload` (n)."""

    t: float
    kind: Literal["limit", "overload"]
    value: int


@attrs.frozen(kw_only=True)
class Trace:
    """The recorded world; `seed` seeds the draws for work the recorded run never finished."""

    seed: int = 0
    episodes: tuple[RecordedEpisode, ...] = ()
    batches: tuple[RecordedBatch, ...] = ()
    controls: tuple[RecordedControl, ...] = ()

    def to_mapping(self) -> dict[str, Any]:
        """Column tables of plain data (the `[trace]` table of a scenario file)."""
        return {
            "seed": self.seed,
            "episodes": _columns(self.episodes, RecordedEpisode),
            "batches": _columns(self.batches, RecordedBatch),
            "controls": _columns(self.controls, RecordedControl),
        }

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "trace") -> Trace:
        """Read the column tables back, refusing bad columns and values by name."""
        unknown = sorted(set(data) - {"seed", "episodes", "batches", "controls"})
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
        seed = data.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"{where}.seed: must be an integer >= 0 (got {seed!r})")
        trace = cls(
            seed=seed,
            episodes=_rows(data.get("episodes", {}), RecordedEpisode, f"{where}.episodes"),
            batches=_rows(data.get("batches", {}), RecordedBatch, f"{where}.batches"),
            controls=_rows(data.get("controls", {}), RecordedControl, f"{where}.controls"),
        )
        _check_values(trace, where)
        return trace


def _columns(rows: Sequence[Any], cls: type[Any]) -> dict[str, list[Any]]:
    return {f.name: [getattr(row, f.name) for row in rows] for f in attrs.fields(cls)}


_COLUMN_TYPES: dict[str, tuple[type, ...]] = {"float": (int, float), "int": (int,), "bool": (bool,)}


def _rows(table: Any, cls: type[Any], where: str) -> tuple[Any, ...]:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table of columns (got {type(table).__name__})")
    fields = {f.name: f for f in attrs.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown column {unknown[0]!r}; known: {', '.join(fields)}")
    lengths = {name: len(column) for name, column in table.items() if isinstance(column, list)}
    if len(lengths) != len(table):
        bad = next(name for name in table if name not in lengths)
        raise ConfigError(f"{where}.{bad}: must be an array")
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"{where}: columns differ in length ({lengths})")
    required = [name for name, f in fields.items() if f.default is attrs.NOTHING]
    missing = [name for name in required if name not in table]
    if table and missing:
        raise ConfigError(f"{where}: missing column {missing[0]!r}")
    count = next(iter(lengths.values()), 0)
    rows = []
    for index in range(count):
        values = {
            name: _value(table[name][index], fields[name], f"{where}.{name}[{index}]")
            for name in table
        }
        rows.append(cls(**values))
    return tuple(rows)


def _value(value: Any, field: Any, where: str) -> Any:
    """A column cell, checked against its field's type (`float`, `int`, `bool`, else text)."""
    kind = field.type if field.type in _COLUMN_TYPES else "str"
    allowed = _COLUMN_TYPES.get(kind, (str,))
    if isinstance(value, bool) != (kind == "bool") or not isinstance(value, allowed):
        raise ConfigError(f"{where}: must be {kind} (got {value!r})")
    return float(value) if isinstance(value, int | float) and kind == "float" else value


def refuse_unread_world_keys(keys: Iterable[str], *, shared: bool = False) -> None:
    """`--set world.KEY` on a world with a trace: a key it does not read would change
    nothing, silently. `shared`: the world's inference is shared (it reads more keys)."""
    read = SHARED_TRACE_WORLD_KEYS if shared else TRACE_WORLD_KEYS
    unread = sorted(set(keys) - read)
    if unread:
        raise ConfigError(
            f"--set world.{unread[0]}: a fitted world (a scenario with [trace]) does not read "
            f"it; it reads {', '.join(sorted(read))}"
        )


def require_finished(episodes: Sequence[RecordedEpisode], where: str) -> None:
    """A trace world draws outcomes from finished episodes: it needs at least one."""
    if all(episode.outcome == "censored" for episode in episodes):
        raise ConfigError(f"{where}: no finished episode to draw outcomes from")


def _check_values(trace: Trace, where: str) -> None:
    for index, episode in enumerate(trace.episodes):
        if episode.outcome not in OUTCOMES:
            raise ConfigError(
                f"{where}.episodes.outcome[{index}]: must be one of {', '.join(OUTCOMES)} "
                f"(got {episode.outcome!r})"
            )
        if not (math.isfinite(episode.seconds) and episode.seconds >= 0.0):
            raise ConfigError(f"{where}.episodes.seconds[{index}]: must be finite and >= 0")
        if not episode.watched_s >= 0.0:
            raise ConfigError(f"{where}.episodes.watched_s[{index}]: must be >= 0 (inf allowed)")
    require_finished(trace.episodes, f"{where}.episodes")
    for index, batch in enumerate(trace.batches):
        if batch.step < 1 or min(batch.train_s, batch.update_s) < 0.0:
            raise ConfigError(f"{where}.batches[{index}]: step >= 1 and times >= 0 required")
    for index, control in enumerate(trace.controls):
        if control.kind not in ("limit", "overload") or control.value < 1 or control.t < 0.0:
            raise ConfigError(
                f"{where}.controls[{index}]: kind limit|overload, value >= 1, t >= 0 required"
            )
