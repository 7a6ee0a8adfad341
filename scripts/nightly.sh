#!/usr/bin/env bash
# The nightly run: the property suites under HYPOTHESIS_PROFILE=nightly (5,000 examples per
# property, randomized, so each round draws new worlds) and the simulator swarm, round after
# round until the time budget is spent. Stops at the first failure; its log names the
# failing example and the `@reproduce_failure` blob. See docs/testing.md.
#
#   scripts/nightly.sh [BUDGET_SECONDS (default 3600)] [LOG_DIR (default runs/nightly)]
#
# On a shared machine run it as `nice -n 10 scripts/nightly.sh ...`.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-3600}
logdir=${2:-runs/nightly}
# The swarm first, then the core's properties (the reference-model comparison among them),
# then replay's. pytest collects a file named twice only once, at its directory's place.
suites=(tests/runtime/sim/test_sim_swarm.py tests/core tests/replay)
mkdir -p "$logdir"
end=$(($(date +%s) + budget))
round=0
while true; do
    left=$((end - $(date +%s)))
    ((left > 30)) || break
    round=$((round + 1))
    log="$logdir/round-$round.log"
    echo "round $round: ${left} s left, log $log"
    # SIGINT at the budget: pytest stops, prints its summary, and timeout exits 124.
    HYPOTHESIS_PROFILE=nightly timeout --signal=INT --kill-after=60 "$left" \
        .venv/bin/python -m pytest -q -p no:cacheprovider --timeout=0 -x "${suites[@]}" \
        >"$log" 2>&1
    status=$?
    tail -n 2 "$log"
    if ((status == 124)); then
        echo "budget spent during round $round: what ran passed"
        break
    elif ((status != 0)); then
        echo "round $round FAILED (exit $status): see $log"
        exit 1
    fi
done
echo "nightly: $round round(s) in ${budget} s, no failure"
