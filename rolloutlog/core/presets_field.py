"""The field presets: other stacks' staleness rules as rows of policy keys (`FIELD`).

Each row is data: `keys` set policy keys on top of `core.presets._OFF`, and the rules they
choose are functions in `core.rules`, through `core.presets.CHOICES`; `source` says where
the stack's code was read. `core.presets` imports the table, and a new stack's rule is a
row here (docs/policies.md gives each one's reading of its source).
"""

from __future__ import annotations

from typing import Any, Final

import attrs


@attrs.frozen
class FieldPreset:
    """Another stack's staleness rule as policy keys, and where its code was read.

    `source` names the repository, the commit or pull request and the files; `keys` are
    the policy keys it sets on top of `core.presets._OFF` (it names its own `staleness`). A
    field preset is data: its rules are functions in `core.rules`, chosen through `CHOICES`.
    """

    source: str
    keys: dict[str, Any]


# No dispatch gate: the source's admission rule (or nothing) paces dispatch; its train loop
# takes batch N once v N - 1 is announced, a ship hold of lag 0 (K - 1 with a sync every K).
_NO_GATE: Final[dict[str, Any]] = {"dispatch_gate": False, "gate_lag": "zero"}

# Name -> the field's rule; docs/policies.md gives each one's reading of its source.
FIELD: Final[dict[str, FieldPreset]] = {
    "prime-rl": FieldPreset(
        source="PrimeIntellect-ai/prime-rl@559b447 src/prime_rl/orchestrator/"
        "{dispatcher,train_sink,utils,orchestrator}.py",
        keys={
            "staleness": "per-group",
            "gate_lag": "one",
            "stale_cancel": "open",
            "stale_step": "before-release",  # its watcher's observers: dispatcher first
            "gate_check": "ship-and-live",
            "stale_check": "after-curriculum",
            "queue_sweep": "at-next-check",
            "overload_count": "in-flight",
            "admission_smoothing": True,  # its dispatcher always meters pool growth
            "admission_window": "restarting",
            "eval_first": True,
        },
    ),
    "areal": FieldPreset(
        source="inclusionAI/AReaL areal==1.0.4 areal/infra/staleness_manager.py "
        "(StalenessManager.get_capacity, on_rollout_accepted/rejected), "
        "areal/infra/workflow_executor.py, areal/infra/remote_inf_engine.py (agenerate: "
        "resubmits an aborted request with its tokens so far), areal/engine/fsdp_engine.py "
        "(pause_generation around every weight update)",
        # interruptible generation is not an option there: every update aborts and resumes;
        # the executor is paused for the whole update (rl_trainer.py:754, 859). Its capacity
        # is the only gate, with no liveness exception.
        keys={
            "staleness": "soft",
            "admission": "areal",
            "weight_update": "interrupt",
            "update_pause": "until-live",
            "liveness": False,
            **_NO_GATE,
        },
    ),
    "tinker": FieldPreset(
        source=(
            "thinking-machines-lab/tinker-cookbook@9dfcc3a tinker_cookbook/rl/train.py "
            "(do_async_training: filter_stale_trajectory_group)"
        ),
        # groups_per_batch workers, one group each (train.py:1293-1297), and no other gate
        keys={
            "staleness": "per-group",
            "requeue": "at-ship",
            "requeue_order": "behind-fresh",  # its builder queue (train.py:974-976, 1111-1116)
            "admission": "workers",
            **_NO_GATE,  # the training loop takes batch N after the sampler of N - 1 (:1233)
        },
    ),
    "slime-lag": FieldPreset(
        source=(
            "THUDM/slime PR #2278 (draft, --max-policy-version-lag; refs/pull/2278/head@54c4e38) "
            "slime/rollout/fully_async_rollout.py (get_completed_groups: the lag read at the "
            "pop from the output queue), slime/rollout/data_source.py, train_async.py"
        ),
        # its worker admits up to its concurrency; train_async runs one step ahead
        keys={
            "staleness": "per-group",
            "requeue": "at-completion",
            "dispatch_gate": False,
            "gate_lag": "one",
        },
    ),
    "verl-fully-async": FieldPreset(
        source=(
            "verl-project/verl@1dda039 verl/experimental/fully_async_policy/"
            "{fully_async_rollouter,message_queue}.py (_should_pause_generation, "
            "reset_staleness, MessageQueue.put_sample), verl/checkpoint_engine/base.py "
            "(update_weights: abort_replicas), verl/workers/rollout/llm_server.py (generate: "
            "an aborted request retried with its tokens so far under partial_rollout)"
        ),
        keys={
            "staleness": "soft",
            "admission": "verl",
            "staleness_threshold": 0.1,  # its yaml's defaults: θ, K and partial_rollout below
            "updates_per_sync": 4,  # trigger_parameter_sync_step
            "weight_update": "interrupt",  # partial_rollout: True
            "update_pause": "until-live",  # reset_staleness after the replicas resume
            "liveness": False,  # at its budget the rollouter waits for a sync (:907-943)
            **_NO_GATE,
        },
    ),
    "tinker-822": FieldPreset(
        source=(
            "thinking-machines-lab/tinker-cookbook PR #822 (open; branch "
            "async-rl-blocking-staleness@0d7fee56 over 9dfcc3a) tinker_cookbook/rl/train.py "
            "(_InFlightGroupTracker, do_async_training: collect_batch)"
        ),
        keys={
            "staleness": "soft",  # never discard: nothing dropped or cancelled for its age
            "admission": "outstanding",
            "ship_wait": "last-chance",
            "batch_order": "oldest-first",
            "liveness": False,  # a worker waits in acquire_slot, even with no group open
            **_NO_GATE,
        },
    ),
    "pipelinerl": FieldPreset(
        source=(
            "ServiceNow/PipelineRL@58d3934 pipelinerl/preprocess.py (run_preprocessing_loop: "
            "processed_entries_queue, pop_old_data), pipelinerl/finetune_loop.py, conf/base.yaml"
        ),
        # Nothing cancelled or dropped for its age (its trainer counts old samples, and
        # trains them); samples wait in a ring buffer of 128 that drops its oldest when full.
        # No gate and no ship hold: with max_lag null the actor submits however far ahead.
        keys={
            "staleness": "soft",
            "queue_limit": 128,
            "queue_eviction": "oldest-episode",
            "gate_lag": "none",
        },
    ),
    "slime-oversample": FieldPreset(
        source=(
            "THUDM/slime@624b824 slime/rollout/sglang_rollout.py (generate_rollout_async, "
            "abort), slime/utils/arguments.py (--over-sampling-batch-size), train.py"
        ),
        keys={
            "staleness": "soft",
            "admission": "slime",
            "gate_lag": "zero",
            "leftovers": "abort",
            "update_pause": "until-live",  # train.py: the next rollout after update_weights
        },
    ),
    "roll-flash": FieldPreset(
        source=(
            "alibaba/ROLL@8eb27cc roll/distributed/scheduler/generate_scheduler.py "
            "(ReplayBuffer: advance_step, get_batch, gc), roll/pipeline/rlvr/rlvr_pipeline.py"
        ),
        keys={
            "staleness": "per-group",  # a prompt is tagged with its step at begin
            "admission": "roll",
            "batch_order": "roll-window",
            "async_generation_ratio": 1.0,  # its examples' value (the code's default is 0)
            "update_pause": "until-live",  # pause_sampling, model_update, then get_batch
            "liveness": False,  # nothing is sent while running + completed is at the budget
            **_NO_GATE,  # each step updates the model, then get_batch takes its batch
        },
    ),
}
# slime with --partial-rollout: a full batch's leftovers go back to the buffer, resumed first.
FIELD["slime-recycle"] = FieldPreset(
    source=(
        "THUDM/slime@624b824 slime/rollout/sglang_rollout.py (abort, generate_and_rm), "
        "slime/rollout/data_source.py (RolloutDataSourceWithBuffer: add_samples, "
        "get_samples, pop_first), slime/utils/arguments.py (--partial-rollout), train.py"
    ),
    keys={**FIELD["slime-oversample"].keys, "leftovers": "run-on", "recycle": True},
)
# verl's v1 sampler (ReplayBufferAsync), one strategy each; its threshold T is the bound + 1.
_VERL_V1 = (
    "verl-project/verl@1dda039 verl/trainer/ppo/v1/replay_buffer.py (ReplayBufferAsync: "
    "_has_enough_samples, _stale_terminal_keys, wait_for_sampleable), "
    "verl/trainer/ppo/v1/trainer_base.py (step, prepare_step, _add_prompts_to_generate)"
)
_VERL_V1_KEYS: dict[str, Any] = {
    "admission": "outstanding",  # (num_warmup_batches = 1) + 1 batches of prompts not trained
    "outstanding_depth": 1,  # whatever the threshold
    "liveness": False,  # nothing new is submitted until the next step begins
    "gate_lag": "zero",  # weights sync at each step's end, before the next batch is put
    "batch_order": "oldest-first",  # _select_prompt_uids: oldest prompt step first
    "update_pause": "until-live",  # the next step submits and samples after on_step_end's sync
    "step_order": "submit-first",  # prepare_step submits its batch, then sample (:1420-1422)
}
FIELD["verl-wait"] = FieldPreset(
    source=_VERL_V1 + ", max_off_policy_strategy = wait",
    keys={**_VERL_V1_KEYS, "staleness": "soft", "ship_wait": "last-chance"},
)
FIELD["verl-drop"] = FieldPreset(
    source=_VERL_V1 + ", max_off_policy_strategy = drop",
    keys={
        **_VERL_V1_KEYS,
        "staleness": "per-group",
        "stale_member": "run-on",
        # a stale finished group stays buffered until a step samples (replay_buffer.py:547-566)
        "stale_check": "after-curriculum",
        "queue_sweep": "while-sampling",
    },
)
# prime-rl PR #2960 over prime-rl main: its keys, with stale members withheld, never cancelled.
FIELD["prime-rl-withhold"] = FieldPreset(
    source="PrimeIntellect-ai/prime-rl PR #2960 (closed; head 8f6b60a over df2acf4) "
    "src/prime_rl/orchestrator/{train_sink,dispatcher}.py, applied to prime-rl@559b447",
    keys={**FIELD["prime-rl"].keys, "stale_member": "withhold"},
)
