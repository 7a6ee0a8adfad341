"""Policy presets: named sets of policy keys, and the table of rules each key chooses.

A preset is a base policy and optional rules joined by `+`: `per-episode`, `per-group`,
`per-episode+capacity`, `per-episode+straggler+oldest-first`, ... `all` is
`per-episode+capacity+straggler+oldest-first`. A base is rolloutlog's own (`BASES`) or one
of the field's (`FIELD`, its rows in `core.presets_field`: another stack's rule as its code
runs, with where it was read).
A preset sets every policy key, so that a scenario's own choice of, say, `admission` never
leaks into a comparison. `field` names the comparison set: every field preset, then
`per-episode` and `all`.

Each policy key's value selects functions from the rule families (`core.rules`) through
one table, `CHOICES`; `rules_for(config)` reads it once per run and the deciders call what
it chose, so a policy is data, not a code path. A new rule is a function in its family and
a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from rolloutlog.core.config import FIELD_RULE_DEFAULTS, ConfigError, RunConfig
from rolloutlog.core.presets_field import FIELD as FIELD
from rolloutlog.core.presets_field import FieldPreset as FieldPreset
from rolloutlog.core.rules import (
    acceptance,
    admission,
    admission_budget,
    admission_field,
    cancellation,
    composition,
    group_shape,
    oversampling,
    requeue_order,
    shipping,
    update_pause,
)
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.state import Queued

# Policy key -> its value -> the rules that value chooses. Every key's rows name the same
# fields, and together the keys name every field of `Rules` but the `DERIVED` ones
# (tests/core/test_preset_names.py). A rule a run does not use is None (or an empty set of
# event classes), so that the deciders call nothing for it.
CHOICES: Final[dict[str, dict[Any, dict[str, Any]]]] = {
    "staleness": {
        "per-episode": {
            "stamp": admission.own_dispatch_version,
            "cancel_stale": cancellation.stale_members,
            "drop_on_arrival": acceptance.drop_stale_arrival,
            "drop_from_queue": acceptance.stale_in_queue,
        },
        "per-group": {
            "stamp": admission.group_start_version,
            "cancel_stale": cancellation.stale_groups,
            "drop_on_arrival": acceptance.drop_stale_and_its_siblings,
            "drop_from_queue": acceptance.stale_in_queue,
        },
        "soft": {
            "stamp": admission.own_dispatch_version,
            "cancel_stale": cancellation.stale_kept,
            "drop_on_arrival": acceptance.keep_arrival,
            "drop_from_queue": acceptance.keep_queued,
        },
    },
    "admission": {
        "none": {  # no ledger kept
            "allowance": None,
            "follow_ledger": None,
            "idle_floor": admission.no_floor,
        },
        "capacity": {
            "allowance": admission.capacity_left,
            "follow_ledger": admission.evolve_ledger,
            "idle_floor": admission.one_episode_when_none_in_flight,
        },
        "areal": {
            "allowance": admission_field.areal_left,
            "follow_ledger": admission_field.evolve_group_ledger,
            "idle_floor": admission.one_group_when_none_open,
        },
        "verl": {
            "allowance": admission_budget.budget_left,
            "follow_ledger": admission_budget.evolve_budget_ledger,
            "idle_floor": admission_budget.budget_idle_floor,
        },
        "outstanding": {
            "allowance": admission_field.outstanding_left,
            "follow_ledger": admission_field.evolve_outstanding_ledger,
            "idle_floor": admission.group_size_when_none_open,
        },
        "workers": {
            "allowance": admission_field.workers_left,
            "follow_ledger": admission_field.evolve_group_ledger,
            "idle_floor": admission.group_size_when_none_open,  # never above its allowance
        },
        "max-lag": {
            "allowance": admission_field.max_lag_left,
            "follow_ledger": admission_field.evolve_lag_ledger,
            "idle_floor": admission.group_size_when_none_open,
        },
        "slime": {
            "allowance": oversampling.slime_left,
            "follow_ledger": oversampling.evolve_round_ledger,
            "idle_floor": oversampling.slime_idle_floor,
        },
        "roll": {
            "allowance": admission_field.roll_left,
            "follow_ledger": admission_field.evolve_roll_ledger,
            "idle_floor": admission.one_group_when_none_open,
        },
    },
    "liveness": {
        True: {"live": admission.with_exception},
        False: {"live": admission.without_exception},
    },
    "admission_smoothing": {
        False: {"permits": None},
        True: {"permits": admission.smoothed},
    },
    "straggler_cut": {
        False: {"cut_stragglers": cancellation.no_straggler_cut},
        True: {"cut_stragglers": cancellation.straggler_cut},
    },
    "batch_order": {
        "fifo": {"batch_order": composition.fifo},
        "oldest-first": {"batch_order": composition.oldest_first},
        "roll-window": {"batch_order": composition.roll_window},
    },
    "requeue": {
        "none": {
            "requeue_group": acceptance.never_requeue,
            "swept_reason": acceptance.swept_as_stale,
            "stale_in_flight": cancellation.stale_in_flight,
        },
        "at-ship": {
            "requeue_group": acceptance.requeue_stale_for_batch,
            "swept_reason": acceptance.swept_for_requeue,
            "stale_in_flight": cancellation.run_to_completion,
        },
        "at-completion": {
            "requeue_group": acceptance.requeue_lagging_version,
            "swept_reason": acceptance.swept_as_stale,
            "stale_in_flight": cancellation.run_to_completion,
        },
    },
    "requeue_order": {
        "first": {"requeue_line": requeue_order.first_line, "follow_requeue": None},
        "behind-fresh": {
            "requeue_line": requeue_order.behind_fresh_line,
            "follow_requeue": requeue_order.follow_builder_queue,
        },
    },
    "gate_lag": {
        "target-lag": {"lag": admission.configured_lag},
        "one": {"lag": admission.lag_of_one},
        "zero": {"lag": admission.lag_of_zero},
        "none": {"lag": admission.no_lag},
    },
    "dispatch_gate": {
        True: {"gate": admission.gate_at_the_lag},
        False: {"gate": admission.no_gate},
    },
    "stale_cancel": {
        "in-flight": {"stale_unscheduled": cancellation.unscheduled_kept},
        "open": {"stale_unscheduled": cancellation.unscheduled_if_stale},
    },
    "stale_step": {
        "current": {"stale_step": cancellation.current_step},
        "before-release": {"stale_step": cancellation.step_before_release},
    },
    "gate_check": {
        "every-event": {"gate_reads": admission.GATE_READS_VERSION},
        "ship-and-live": {"gate_reads": admission.GATE_READS_LAST_CHECK},
    },
    "stale_check": {
        "at-finalize": {"arrival_bound": acceptance.the_bound},
        "after-curriculum": {"arrival_bound": acceptance.no_bound_before_curriculum},
    },
    "queue_sweep": {
        "at-ship": {"checks_queue": acceptance.check_at_each_step_event},
        "at-next-check": {"checks_queue": acceptance.check_at_next_finalize},
        "while-sampling": {"checks_queue": acceptance.check_while_sampling},
    },
    "overload_count": {
        "owed": {"overload": cancellation.overload},
        "in-flight": {"overload": cancellation.overload_in_flight},
    },
    "admission_window": {
        "fixed": {
            "advance_window": admission.fixed_window,
            "window_after": admission.fixed_window_after,
            "refund": admission.net_refund,
        },
        "restarting": {
            "advance_window": admission.restarting_window,
            "window_after": admission.restarting_window_after,
            "refund": admission.floored_refund,
        },
    },
    "eval_first": {
        False: {"fill_passes": admission.ONE_PASS},
        True: {"fill_passes": admission.EVALS_FIRST},
    },
    "ship_wait": {
        "none": {"ship_waits": shipping.ship_at_once},
        "last-chance": {"ship_waits": shipping.waits_for_last_chance},
    },
    "update_pause": {
        "none": {"update_pause": None, "checks_at_live": False},
        "until-live": {"update_pause": update_pause.paused_until_live, "checks_at_live": True},
    },
    "step_order": {
        "ship-first": {"dispatcher_first": update_pause.SHIP_FIRST},
        "submit-first": {"dispatcher_first": update_pause.SUBMIT_FIRST},
    },
    "stale_member": {
        "cancel": {
            "withholds": None,
            "cancels_stale_work": cancellation.cancel_stale_work,
        },
        "withhold": {
            "withholds": acceptance.withhold_past_version_bound,
            "cancels_stale_work": cancellation.never_cancel_stale,
        },
        "run-on": {
            "withholds": None,
            "cancels_stale_work": cancellation.never_cancel_stale,
        },
    },
    "weight_update": {
        "freeze": {"drain_pause": None, "interrupts": False},
        "interrupt": {"drain_pause": None, "interrupts": True},
        "drain": {"drain_pause": update_pause.drained_until_live, "interrupts": False},
    },
    "recycle": {
        False: {"recycles": False},
        True: {"recycles": True},
    },
    # A count, not a choice: its rule runs where it is not zero (`SWITCHED_BY_COUNT`).
    "group_redundancy": {
        False: {"cancels_redundant": frozenset()},
        True: {"cancels_redundant": group_shape.ARRIVALS},
    },
    "queue_eviction": {
        "oldest-episode": {"evict": acceptance.evict_oldest_episodes},
        "oldest-group": {"evict": acceptance.evict_oldest_groups},
    },
    "leftovers": {
        "run-on": {
            "abort_leftovers": oversampling.leftovers_run_on,
            "queue_leftovers": oversampling.queue_kept,
            "leftover_group": oversampling.never_leftover,
        },
        "abort": {
            "abort_leftovers": oversampling.abort_leftovers,
            "queue_leftovers": oversampling.queue_beyond_batch,
            "leftover_group": oversampling.sampled_for_a_shipped_batch,
        },
    },
    "stale_tokens": {
        "drop": {
            "stale_view": None,
            "masked": None,
            "keeps_segments": False,
            "goes_on_under": None,
        },
        "mask": {
            "stale_view": acceptance.read_end,
            "masked": acceptance.tokens_past_the_bound,
            "keeps_segments": True,
            "goes_on_under": cancellation.the_version_it_goes_on_under,
        },
    },
}


# Settings that are counts, not choices: a count's rule runs only where it is not zero.
SWITCHED_BY_COUNT: Final = frozenset({"group_redundancy"})
# Rules that serve another: None where the rule they serve is None (the run does not use
# it). `admission_window` chooses how smoothing's window moves and what a completion
# refunds; without smoothing (`permits` None) no window is kept and no tick is owed.
SERVES: Final = {"advance_window": "permits", "window_after": "permits", "refund": "permits"}


def rules_for(config: RunConfig) -> Rules:
    """The rules `config`'s policy keys choose, from `CHOICES`, and what they fix for the
    whole run read once (`core.rules.table.DERIVED`)."""
    chosen: dict[str, Any] = {}
    for key, values in CHOICES.items():
        value = getattr(config, key)
        chosen.update(values[bool(value) if key in SWITCHED_BY_COUNT else value])
    for rule, served in SERVES.items():
        if chosen[served] is None:
            chosen[rule] = None
    hold_lag = chosen["lag"](config)
    return Rules(
        **chosen,
        hold_lag=hold_lag,
        gate_lag=chosen["gate"](hold_lag),
        queued_stale=_through_view(chosen["stale_view"], chosen["drop_from_queue"]),
    )


def _through_view(
    view: Callable[[Any], Any] | None, drop: Callable[[Queued, int, int], bool]
) -> Callable[[Queued, int, int], bool]:
    """The queue's drop rule read through the run's view of an episode (`stale_tokens =
    mask` judges its last segment), or the rule itself where the run has no view."""
    if view is None:
        return drop

    def stale(queued: Queued, step: int, bound: int) -> bool:
        return drop(view(queued), step, bound)

    return stale


FIELD_SET = "field"
# rolloutlog's bases and the keys each sets on top of `_OFF`: `per-group` is the seed's
# "before", prime-rl main's rule, whose `drop_group` cancels everything a stale group owes,
# unscheduled members too (docs/policies.md, "per-group and the seed's before").
BASE_KEYS: dict[str, dict[str, Any]] = {"per-episode": {}, "per-group": {"stale_cancel": "open"}}
BASES = tuple(BASE_KEYS)
RULES: dict[str, dict[str, Any]] = {
    "capacity": {"admission": "capacity"},
    "straggler": {"straggler_cut": True},
    "oldest-first": {"batch_order": "oldest-first"},
    "interrupt": {"weight_update": "interrupt"},  # AReaL's interruptible generation
    "drain": {"weight_update": "drain"},  # updates wait for the train work in flight
    "recycle": {"recycle": True},  # slime's partial rollout: a full batch recycles the rest
    "mask": {"stale_tokens": "mask"},  # old segments train masked; only the end is held
}
ALIASES = {"all": "per-episode+capacity+straggler+oldest-first"}
NAMED = ("per-group", "per-episode", "per-episode+capacity", "per-episode+straggler", "all")
_OFF: dict[str, Any] = {
    "admission": "none",
    "admission_smoothing": False,  # prime-rl's; a what-if from its log kept it under others
    "straggler_cut": False,
    "batch_order": "fifo",
    **FIELD_RULE_DEFAULTS,  # rolloutlog's own rule where a field preset decides otherwise
}


def preset_overrides(name: str) -> dict[str, Any]:
    """The config keys that preset `name` sets; unknown parts are refused by name."""
    base, *rules = ALIASES.get(name, name).split("+")
    if base in FIELD:
        overrides: dict[str, Any] = {**_OFF, **FIELD[base].keys}
    elif base in BASES:
        overrides = {"staleness": base, **_OFF, **BASE_KEYS[base]}
    else:
        raise ConfigError(
            f"policy {name!r}: must start with one of {', '.join([*BASES, *FIELD])} (or be 'all')"
        )
    for n, rule in enumerate(rules):
        if rule not in RULES:
            raise ConfigError(
                f"policy {name!r}: unknown rule {rule!r}; known rules: {', '.join(RULES)}"
            )
        if rule in rules[:n]:
            raise ConfigError(f"policy {name!r}: names rule {rule!r} twice")
    _refuse_contradictions(name, rules)
    for rule in rules:
        overrides.update(RULES[rule])
    return overrides


def _refuse_contradictions(name: str, rules: list[str]) -> None:
    """Two `+RULE` parts that set one key to different values (`+drain+interrupt`) are
    refused: the last would silently win."""
    setters: dict[str, tuple[str, Any]] = {}
    for rule in rules:
        for key, value in RULES[rule].items():
            earlier = setters.setdefault(key, (rule, value))
            if earlier[1] != value:
                raise ConfigError(
                    f"policy {name!r}: rules {earlier[0]!r} and {rule!r} contradict each "
                    f"other ({key} = {earlier[1]!r} or {value!r}); name one"
                )


def field_set() -> list[str]:
    """The presets `field` stands for: the field's rules, then rolloutlog's own two."""
    return [*FIELD, "per-episode", "all"]


def parse_policy_list(text: str) -> list[str]:
    """A comma-separated list of presets, each checked (`field` stands for `field_set()`);
    duplicates are refused."""
    names = []
    for part in text.split(","):
        name = part.strip()
        names.extend(field_set() if name == FIELD_SET else [name] if name else [])
    if not names:
        raise ConfigError("policy list is empty; for example per-episode,per-group")
    for name in names:
        preset_overrides(name)
    if len(set(names)) != len(names):
        raise ConfigError(f"policy list {text!r} names a policy twice")
    return names
