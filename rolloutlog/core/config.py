"""The run configuration, and a strict builder that names the key of every bad value.

Configuration arrives as plain data (a TOML table, `--set key=value` overrides, the
`config` object of a recorded `run_started`). `build_config` turns such a mapping into a
frozen attrs class and refuses unknown keys, wrong types and impossible values with a
message that names the key and what is allowed. Reading files is the caller's business:
the core does no I/O.
"""

from __future__ import annotations

import functools
import math
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs

from rolloutlog.core.curriculum import known_curriculum

StalenessPolicy = Literal["per-episode", "per-group", "soft"]
AdmissionPolicy = Literal[
    "none", "capacity", "areal", "verl", "outstanding", "max-lag", "slime", "roll", "workers"
]
BatchOrder = Literal["fifo", "oldest-first", "roll-window"]
RequeuePolicy = Literal["none", "at-ship", "at-completion"]
RequeueOrder = Literal["first", "behind-fresh"]
GateLag = Literal["target-lag", "one", "zero", "none"]
Leftovers = Literal["run-on", "abort"]
StaleCancel = Literal["in-flight", "open"]
StaleCheck = Literal["at-finalize", "after-curriculum"]
StaleStep = Literal["current", "before-release"]
GateCheck = Literal["every-event", "ship-and-live"]
QueueSweep = Literal["at-ship", "at-next-check", "while-sampling"]
OverloadCount = Literal["owed", "in-flight"]
AdmissionWindow = Literal["fixed", "restarting"]
ShipWait = Literal["none", "last-chance"]
UpdatePause = Literal["none", "until-live"]
StepOrder = Literal["ship-first", "submit-first"]
WeightUpdate = Literal["freeze", "interrupt", "drain"]
StaleMember = Literal["cancel", "withhold", "run-on"]
StaleTokens = Literal["drop", "mask"]
QueueEviction = Literal["oldest-episode", "oldest-group"]
DEFAULT_BATCH_SIZE = 64
# A run starts with every permit free: its first event dispatches max_inflight episodes,
# which must stay well under what the loop lets one event set off (`loop.MAX_REACTIONS`).
MAX_INFLIGHT = 100_000

Check = Callable[[Any], str | None]


class ConfigError(ValueError):
    """A configuration value was refused; the message names the key and what is allowed."""


@attrs.frozen
class AtLeast:
    """A field check: the value must be `>= low`. A class, not a closure made at import:
    the comparison is then code that runs when a value is checked."""

    low: float

    def __call__(self, value: Any) -> str | None:
        return None if value >= self.low else f"must be >= {self.low}"


@attrs.frozen
class Between:
    """A field check: the value must lie in `[low, high]` (a class, as `AtLeast`)."""

    low: float
    high: float

    def __call__(self, value: Any) -> str | None:
        return None if self.low <= value <= self.high else f"must be in [{self.low}, {self.high}]"


def checked(default: Any, check: Check | None = None, doc: str = "") -> Any:
    """An attrs field with a value check that `build_config` runs, and a one-line doc."""
    return attrs.field(default=default, metadata={"check": check, "doc": doc})


def least_queue_limit(group_size: int, batch_size: int | None, eviction: str) -> int:
    """The smallest `queue_limit` with which a batch can fill. Whole-group eviction needs
    room for a batch less one episode beside a group: a queue short of a batch then takes a
    group without evicting, and evicting one group from a queue past the limit leaves a
    batch (docs/contract.md, "Bounded queue")."""
    if eviction == "oldest-group" and batch_size:
        return batch_size + group_size - 1
    return max(group_size, batch_size or 0)


def _default_target_lag(config: RunConfig) -> int:
    """One step of lag, or none when nothing may be off-policy (`max_off_policy_steps = 0`)."""
    return min(1, config.max_off_policy_steps)


@attrs.frozen(kw_only=True)
class RunConfig:
    """What the dispatcher and the sink need to decide; recorded in `run_started.config`."""

    max_inflight: int = checked(64, AtLeast(1), "permits: episodes in flight at once")
    max_off_policy_steps: int = checked(8, AtLeast(0), "largest rollout age that may train")
    group_size: int = checked(8, AtLeast(1), "G: episodes per GRPO group")
    batch_size: int | None = checked(DEFAULT_BATCH_SIZE, AtLeast(1), "episodes per batch")
    token_batch_size: int | None = checked(None, AtLeast(1), "tokens per batch")
    target_lag: int = checked(
        attrs.Factory(_default_target_lag, takes_self=True),
        AtLeast(0),
        "gate: train dispatch pauses past this lag (default min(1, max_off_policy_steps))",
    )
    staleness: StalenessPolicy = checked(
        "per-episode", None, "staleness enforcement (soft: stamped per episode, none dropped)"
    )
    filter_zero_advantages: bool = checked(True, None, "prune zero-advantage episodes")
    seed: int = checked(0, None, "seed of the task source")
    tasks: int = checked(1024, AtLeast(1), "size of the task set the task source samples")
    eval_interval: int = checked(0, AtLeast(0), "open one eval group every N steps (0: off)")
    frozen_fraction: float = checked(0.0, Between(0.0, 1.0), "train groups from a frozen source")
    admission_smoothing: bool = checked(False, None, "cap pool growth per 5-second window")
    curriculum: str = checked("all", known_curriculum, "group admission rule (core.curriculum)")
    zero_output_batches: int = checked(10, AtLeast(1), "stop after N batches of nothing admitted")
    admission: AdmissionPolicy = checked(
        "none",
        None,
        "capacity: cap train work ahead of trainer; areal: AReaL's, in groups; "
        "verl: a sample budget per weight sync; max-lag: PipelineRL's; "
        "slime: rounds of over_sampling_batch_size groups per step; roll: ROLL's, in groups; "
        "workers: tinker's, a batch's groups open at once",
    )
    straggler_cut: bool = checked(False, None, "cut stragglers so at-risk arrivals still train")
    batch_order: BatchOrder = checked(
        "fifo", None, "batch cut order: fifo, oldest-first, or roll-window (ROLL's get_batch)"
    )
    requeue: RequeuePolicy = checked(
        "none", None, "stale group: none (dropped), or discarded whole and its task requeued"
    )
    requeue_order: RequeueOrder = checked(
        "first", None, "a requeued task opens before any fresh one, or behind a batch's fresh ones"
    )
    gate_lag: GateLag = checked(
        "target-lag",
        None,
        "gate and ship hold lag: target_lag, one, zero (synchronous), or none (neither)",
    )
    dispatch_gate: bool = checked(
        True, None, "train dispatch pauses past gate_lag (false: the lag holds only the ship)"
    )
    liveness: bool = checked(
        True, None, "with no train group open one may open whatever admission says"
    )
    outstanding_depth: int | None = checked(
        None, AtLeast(0), "outstanding admission: batches out past one (None: target_lag)"
    )
    stale_cancel: StaleCancel = checked(
        "in-flight", None, "version_pending cancels stale in-flight work, or stale open groups"
    )
    stale_step: StaleStep = checked(
        "current",
        None,
        "version_pending's stale cancellation reads the step after a batch it releases, or before",
    )
    gate_check: GateCheck = checked(
        "every-event", None, "the gate is read at every event, or only at a ship and version_live"
    )
    stale_check: StaleCheck = checked(
        "at-finalize", None, "stale arrivals drop at finalize, or at queueing after curriculum"
    )
    queue_sweep: QueueSweep = checked(
        "at-ship",
        None,
        "queue swept when a batch ships, at the next readiness check, or only while the "
        "trainer samples (whole, at each check past the ship hold and the update pause)",
    )
    overload_count: OverloadCount = checked(
        "owed", None, "an overload cut counts owed episodes, or in-flight train ones"
    )
    admission_window: AdmissionWindow = checked(
        "fixed", None, "smoothing windows: fixed 5 s slots, or restarting at the first event"
    )
    eval_first: bool = checked(False, None, "owed eval work takes permits before any train group")
    updates_per_sync: int = checked(
        1, AtLeast(1), "K: trainer updates per weight sync (version_pending after every K-th)"
    )
    staleness_threshold: float = checked(
        0.1, AtLeast(0.0), "verl admission: θ, a sync window opens R·(1+θ)·K train groups"
    )
    ship_wait: ShipWait = checked(
        "none", None, "a full batch ships at once, or waits for in-flight work at its last chance"
    )
    update_pause: UpdatePause = checked(
        "none", None, "new train work and a held batch go at version_pending, or wait until live"
    )
    step_order: StepOrder = checked(
        "ship-first",
        None,
        "at a weight update the sink answers before the dispatcher, or after it (verl's step "
        "submits its prompts, then samples)",
    )
    weight_update: WeightUpdate = checked(
        "freeze", None, "work in flight at an update: freeze, interrupt and resume, or drain"
    )
    recycle: bool = checked(
        False, None, "a shipped batch aborts the train work in flight, resumed first (slime)"
    )
    stale_tokens: StaleTokens = checked(
        "drop", None, "past the bound: drop the episode, or mask its old segments (end must fit)"
    )
    stale_member: StaleMember = checked(
        "cancel",
        None,
        "stale work cancelled in flight, run on and withheld at finalize, or run on and dropped",
    )
    queue_limit: int = checked(0, AtLeast(0), "the most episodes the sink's queue holds (0: any)")
    max_lag: int = checked(0, AtLeast(0), "admission = max-lag: PipelineRL's max_lag, in episodes")
    queue_eviction: QueueEviction = checked(
        "oldest-episode", None, "a full queue drops its oldest episode, or its oldest group"
    )
    over_sampling_batch_size: int | None = checked(
        None, AtLeast(1), "slime admission: groups per sampling round (None: a batch's groups)"
    )
    leftovers: Leftovers = checked(
        "run-on", None, "when a batch ships, train groups still owed run on, or are aborted"
    )
    async_generation_ratio: float = checked(
        0.0, AtLeast(0.0), "α: ROLL's head start, in batches (admission = roll)"
    )
    group_redundancy: int = checked(
        0, AtLeast(0), "r: members dispatched past G; the first G arrivals finalize a group"
    )

    def startup_problems(self) -> list[str]:
        """Why rolloutlog would not start a run with this config (empty when it would).

        `simulate` and `train` refuse such a config; a recorded log that has one (another
        orchestrator may allow it) is still folded, with these as warnings.
        """
        found = (check(self) for check in _STARTUP_CHECKS)
        return [problem for problem in found if problem is not None]

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as recorded in `run_started.config`. The field presets' keys are left
        out at their defaults, so a run under rolloutlog's own rules records (and digests,
        and caches) the config it did before they existed; reading it back defaults them."""
        data = attrs.asdict(self)
        for name in FIELD_RULE_KEYS:
            if data[name] == FIELD_RULE_DEFAULTS[name]:
                del data[name]
        return data

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], where: str = "config", *, startable: bool = True
    ) -> RunConfig:
        """Build from plain data; setting only `token_batch_size` switches to token batches.

        With `startable` (a run about to start) a config with `startup_problems` is refused;
        without it (a recorded log to fold) it is built as recorded.
        """
        data = dict(data)
        if data.get("token_batch_size") is not None and "batch_size" not in data:
            data["batch_size"] = None
        config = build_config(cls, data, where)
        problems = config.startup_problems() if startable else []
        if problems:
            raise ConfigError(problems[0])
        return config


# The keys only field presets change (`core.presets.FIELD`), and their defaults.

# --- what `RunConfig.startup_problems` checks: one function per rule, each the reason or None


def _one_batch_size(c: RunConfig) -> str | None:
    if (c.batch_size is None) != (c.token_batch_size is None):
        return None
    return (
        "batch_size / token_batch_size: set exactly one "
        f"(got batch_size={c.batch_size}, token_batch_size={c.token_batch_size})"
    )


def _inflight_bounded(c: RunConfig) -> str | None:
    if c.max_inflight <= MAX_INFLIGHT:
        return None
    return (
        f"max_inflight: at most {MAX_INFLIGHT:,}, got {c.max_inflight:,}: one event "
        "may dispatch every free permit, and the loop bounds what one event sets off"
    )


def _target_lag_within_bound(c: RunConfig) -> str | None:
    if c.target_lag <= c.max_off_policy_steps:
        return None
    return (
        f"target_lag: must be <= max_off_policy_steps ({c.max_off_policy_steps}), "
        f"got {c.target_lag}: the gate would let episodes be dispatched already stale"
    )


def _queue_fits(c: RunConfig) -> str | None:
    if 0 < c.queue_limit < max(c.group_size, c.batch_size or 0):
        return (
            f"queue_limit: must be 0 or >= group_size and batch_size, got {c.queue_limit}: "
            "an admitted group must fit in the queue, and a batch must be able to fill"
        )
    if not (c.queue_limit and c.queue_eviction == "oldest-group" and c.batch_size):
        return None
    least = least_queue_limit(c.group_size, c.batch_size, c.queue_eviction)
    if c.queue_limit >= least:
        return None
    return (
        f"queue_limit: must be >= batch_size + group_size - 1 ({least}) with "
        f"queue_eviction = 'oldest-group', got {c.queue_limit}: evicting whole "
        "groups from a smaller queue can keep it below a batch for ever"
    )


def _slime_round_holds_a_batch(c: RunConfig) -> str | None:
    rounds = c.over_sampling_batch_size
    if c.admission != "slime" or rounds is None or c.batch_size is None:
        return None
    batch_groups = -(-c.batch_size // c.group_size)
    if rounds >= batch_groups:
        return None
    return (
        f"over_sampling_batch_size: must be >= the {batch_groups} groups of a batch "
        f"(got {rounds}): slime refuses a round smaller than rollout_batch_size"
    )


def _last_chance_needs_outstanding(c: RunConfig) -> str | None:
    if c.ship_wait != "last-chance" or c.admission == "outstanding":
        return None
    return (
        f"ship_wait: 'last-chance' needs admission = 'outstanding' (got "
        f"{c.admission!r}): PR #822 waits behind its cap on outstanding groups; "
        "without it new groups keep opening at their last chance and a batch may wait "
        "for ever"
    )


def _last_chance_without_drain(c: RunConfig) -> str | None:
    if c.ship_wait != "last-chance" or c.weight_update != "drain":
        return None
    return (
        "ship_wait: 'last-chance' does not combine with weight_update = 'drain': "
        "a drained update holds the dispatch a waiting batch needs"
    )


def _roll_window_one_update(c: RunConfig) -> str | None:
    if c.batch_order != "roll-window" or c.updates_per_sync <= 1:
        return None
    return (
        f"batch_order: 'roll-window' needs updates_per_sync = 1 (got "
        f"{c.updates_per_sync}): ROLL's window counts one weight update a step, and "
        "with fewer versions it excludes what waits, so batches never fill"
    )


def _drain_without_budgets(c: RunConfig) -> str | None:
    if c.weight_update != "drain" or c.admission not in ("verl", "slime"):
        return None
    return (
        f"weight_update: 'drain' does not combine with admission = {c.admission!r}: "
        "its budget reopens only with a new version or step, which a drained update "
        "holds back, and runs stall"
    )


def _recycle_without_drain(c: RunConfig) -> str | None:
    if not c.recycle or c.weight_update != "drain":
        return None
    return (
        "recycle: does not combine with weight_update = 'drain': a drained update "
        "waits for the work in flight, and recycled work waits for the update"
    )


def _recycle_one_update(c: RunConfig) -> str | None:
    if not c.recycle or c.updates_per_sync <= 1:
        return None
    return (
        f"recycle: needs updates_per_sync = 1 (got {c.updates_per_sync}): recycled "
        "work holds train dispatch until the next version goes live, and the batches "
        "of a sync would wait for it"
    )


def _slime_without_redundancy(c: RunConfig) -> str | None:
    if c.admission != "slime" or not c.group_redundancy:
        return None
    return (
        f"group_redundancy: must be 0 under admission = 'slime' (got "
        f"{c.group_redundancy}): slime's rounds count whole groups of group_size"
    )


def _whole_groups_without_liveness(c: RunConfig) -> str | None:
    """AReaL's, ROLL's, verl's and PR #822's rules count `⌊B/G⌋` groups a batch; their
    sources train whole groups, rolloutlog cuts batches of `B` episodes. Without the
    liveness exception the groups such a rule lets out fall short of the batches they owe,
    for good (verl's: of the `K` batches a sync window owes)."""
    size, batch = c.group_size, c.batch_size
    admissions = ("areal", "roll", "outstanding", "verl")
    if c.liveness or batch is None or c.admission not in admissions:
        return None
    groups = max(1, batch // size)
    depth = c.target_lag if c.outstanding_depth is None else c.outstanding_depth
    whole = groups * size * (depth + 1 if c.admission == "outstanding" else 1)
    needed, per = batch, "where batches"
    if c.admission == "verl":  # a window's budget, for the K batches it owes
        k = c.updates_per_sync
        whole = int(groups * (1 + c.staleness_threshold) * k) * size
        needed, per = batch * k, f"a sync window, where its {k} batches"
    if whole >= needed:
        return None
    return (
        f"liveness: false with admission = {c.admission!r} needs batches of whole groups "
        f"(batch_size {batch}, group_size {size}): its rule counts {groups} group(s) a batch "
        f"and lets {whole} episodes out {per} of {batch} need more: the run would "
        "starve (its source trains whole groups)"
    )


# In the order their reasons are listed.
_STARTUP_CHECKS: tuple[Callable[[RunConfig], str | None], ...] = (
    _one_batch_size,
    _inflight_bounded,
    _target_lag_within_bound,
    _queue_fits,
    _slime_round_holds_a_batch,
    _last_chance_needs_outstanding,
    _last_chance_without_drain,
    _roll_window_one_update,
    _drain_without_budgets,
    _recycle_without_drain,
    _recycle_one_update,
    _slime_without_redundancy,
    _whole_groups_without_liveness,
)

FIELD_RULE_KEYS = (
    "requeue",
    "requeue_order",
    "gate_lag",
    "dispatch_gate",
    "liveness",
    "outstanding_depth",
    "stale_cancel",
    "stale_step",
    "gate_check",
    "stale_check",
    "queue_sweep",
    "overload_count",
    "admission_window",
    "eval_first",
    "staleness_threshold",
    "updates_per_sync",
    "ship_wait",
    "update_pause",
    "step_order",
    "weight_update",
    "recycle",
    "stale_tokens",
    "stale_member",
    "queue_limit",
    "queue_eviction",
    "max_lag",
    "over_sampling_batch_size",
    "leftovers",
    "group_redundancy",
    "async_generation_ratio",
)
FIELD_RULE_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in attrs.fields(RunConfig) if f.name in FIELD_RULE_KEYS
}

C = TypeVar("C")


def build_config(cls: type[C], data: Mapping[str, Any], where: str = "config") -> C:
    """Build the attrs config class `cls` from `data`, refusing bad keys and values by name."""
    fields = {f.name: f for f in attrs.fields(cls)}  # type: ignore[arg-type]
    hints = _type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(fields))}"
        )
    values = {}
    for name, value in data.items():
        values[name] = _coerce(f"{where}.{name}", hints[name], value)
        check = fields[name].metadata.get("check")
        problem = check(values[name]) if check and values[name] is not None else None
        if problem:
            raise ConfigError(f"{where}.{name}: {problem} (got {value!r})")
    return cls(**values)


def _type_hints(cls: type) -> dict[str, Any]:
    """A config class's annotations, resolved once: `typing.get_type_hints` costs more than
    the rest of a build (a fifth of a planted-fault property's time went to it)."""
    return _resolved(cls)


_resolved = functools.cache(typing.get_type_hints)


def _coerce(key: str, hint: Any, value: Any) -> Any:
    """Check `value` against the type `hint`; ints are accepted where floats are expected."""
    origin = get_origin(hint)
    if origin is Literal:
        allowed = get_args(hint)
        if value not in allowed:
            raise ConfigError(
                f"{key}: must be one of {', '.join(map(repr, allowed))} (got {value!r})"
            )
        return value
    if origin in (types.UnionType, typing.Union):
        options = [a for a in get_args(hint) if a is not type(None)]
        if value is None and len(options) < len(get_args(hint)):
            return None
        return _coerce(key, options[0], value)
    return _coerce_scalar(key, hint, value)


def _coerce_scalar(key: str, hint: Any, value: Any) -> Any:
    expected = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }.get(hint)
    if ok is None:
        if isinstance(value, hint):
            return value
        raise ConfigError(f"{key}: must be {hint.__name__} (got {value!r})")
    if not ok:
        raise ConfigError(f"{key}: must be {expected[hint]} (got {value!r})")
    if hint is float:
        if not math.isfinite(value):
            raise ConfigError(f"{key}: must be a finite number (got {value!r})")
        return float(value)
    return value


BATCH_KEYS = ("batch_size", "token_batch_size")


def apply_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `overrides` on top; setting one of the batch keys clears the other.

    A scenario that sets `batch_size` switches to token batches with one override,
    `token_batch_size=4000`, and back; overriding both keeps both (and is refused later
    if both are set).
    """
    merged = {**base, **overrides}
    for key, other in (BATCH_KEYS, BATCH_KEYS[::-1]):
        if overrides.get(key) is not None and other not in overrides:
            merged[other] = None
    return merged


def parse_overrides(overrides: Iterable[str]) -> dict[str, Any]:
    """Parse `key=value` strings; values are TOML values, or bare strings when not TOML.

    `batch_size=32` gives an int, `filter_zero_advantages=false` a bool and
    `staleness=per-group` the string `"per-group"`.
    """
    parsed: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected key=value")
        if key in parsed:  # one would silently win
            raise ConfigError(f"--set {item!r}: {key} is given twice; give one value")
        try:
            parsed[key] = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError:
            parsed[key] = raw.strip()
    return parsed
