"""The books every check of the account reads: step, version, open groups, what is in flight
and queued, and the run summary; and how a check reports what broke.

Each check (`core.account.checks`) keeps the books of its own rule beside these and reads
these only through `Books`; the flows of the events (`core.account.account`,
`core.account.sink`) keep them.
"""

from __future__ import annotations

from typing import Final

from rolloutlog.core.account.groups import NO_LAG, Group, age
from rolloutlog.core.account.properties import kept_properties
from rolloutlog.core.config import RunConfig
from rolloutlog.core.registry import DispatchRegistry
from rolloutlog.core.run_summary import RunSummary

# prime-rl's gate and hold allow a lag of one whatever the bound, slime's train.py none,
# pipelinerl neither gate nor hold (`gate_lag`); a version every K batches
# (`updates_per_sync`) adds K − 1.
_GATE_LAGS: Final = {"one": 1, "zero": 0, "none": NO_LAG}


class InvariantViolation(AssertionError):
    """A property does not hold at the named seq."""


class Books:
    """The shared books of one run's account.

    With `raise_on_violation`, the first broken property raises `InvariantViolation`;
    otherwise each is collected in `violations` as "seq N (kind): what broke".
    """

    def __init__(self, config: RunConfig, *, raise_on_violation: bool = True) -> None:
        self.raise_on_violation = raise_on_violation
        self.violations: list[str] = []
        self.config = config
        self.kept = kept_properties(config)
        self.bound: int = config.max_off_policy_steps
        lag = _GATE_LAGS.get(config.gate_lag, config.target_lag)
        self.target_lag: int = lag + config.updates_per_sync - 1  # the ship hold's
        self.dispatch_gate: bool = config.dispatch_gate  # at the hold's lag; AReaL, ROLL: none
        self.group_size: int = config.group_size
        self.redundancy: int = config.group_redundancy
        self.batch_size: int | None = config.batch_size
        self.per_episode = config.staleness != "per-group"  # how each episode is stamped
        self.step, self.version, self.limit = 1, 0, config.max_inflight
        self.publish_step = 1  # the step when the last version update arrived
        self.live_version = 0  # the version inference serves (`version_live`)
        self.now = 0.0  # the time of the event being folded
        self.groups: dict[str, Group] = {}  # open until group_scored
        self.inflight: dict[str, Group] = {}
        self.queue: dict[str, tuple[int, bool, int]] = {}  # id -> (version, ages, tokens)
        self.registry = DispatchRegistry()  # tells a late arrival from a bogus one
        self.finished = False
        self.gated = self.lags()  # kept with step and version: the ship hold (and the gate)
        self.run = RunSummary(
            ship_wait=config.ship_wait != "none",
            withholds=config.stale_member == "withhold",
            masks=config.stale_tokens == "mask",
        )

    def fail(self, seq: int, kind: str, problem: str) -> None:
        message = f"seq {seq} ({kind}): {problem}"
        if self.raise_on_violation:
            raise InvariantViolation(message)
        self.violations.append(message)

    def shipped(self) -> int:
        """Batches shipped so far (the step is the one the next batch trains)."""
        return self.step - 1

    def lags(self) -> bool:
        """The trainer lags the step by more than `target_lag`: batch `step` may not ship
        (the ship hold), and where the run keeps a dispatch gate it is shut."""
        return age(self.version, self.step) > self.target_lag

    def members(self, group: Group) -> int:
        """What a group accounts for: G + r members (`group_redundancy` r)."""
        return group.size + self.redundancy

    def awaits_ship(self, episode_id: str) -> bool:
        """An arrival a batch may still take: queued, or in a group not yet scored."""
        return episode_id in self.queue or episode_id.rpartition("/")[0] in self.groups
