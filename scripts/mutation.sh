#!/usr/bin/env bash
# Mutation testing of rolloutlog/core/ by the property tests alone (the selection is in
# pyproject.toml, [tool.mutmut]; the hand-written tests are left out). mutmut runs, for each
# mutant, only the properties that reach the mutated function, fastest first, and stops at
# the first failure; HYPOTHESIS_PROFILE=mutation keeps each at a few fixed examples.
# Needs the `mutation` extra. Results stay in mutants/ (ignored by git). benchmarks/RESULTS.md has
# the last measured score.
#
#   scripts/mutation.sh                           # every mutant of rolloutlog/core/
#   scripts/mutation.sh "rolloutlog.core.sink*"   # only these (mutmut's mutant names)
#   scripts/mutation.sh --sample 300 --seed 1     # a uniform random sample of all of them,
#                                                 # scored per module with a 95% interval;
#                                                 # mutants judged before are not rerun (name
#                                                 # them explicitly to rerun after new tests)
#
# MUTATION_WORKERS (default 1) sets the parallel workers; on a shared machine keep it low.
set -euo pipefail
cd "$(dirname "$0")/.."
export HYPOTHESIS_PROFILE=mutation
mutmut() { nice -n 10 .venv/bin/mutmut "$@"; }

if [[ "${1:-}" == "--sample" ]]; then
    [[ $# -eq 4 && "$3" == "--seed" ]] || { echo "usage: $0 --sample N --seed S" >&2; exit 2; }
    size=$2 seed=$4
    # mutmut (re)generates the mutants of changed files at the start of a run, and numbers
    # them per function: a run of the few scoring mutants brings every name up to date
    # before the sample is drawn.
    # Its output is kept: a failure of this run (of the tracing of the whole selection) is
    # otherwise silent.
    mkdir -p mutants
    if ! mutmut run --max-children 1 "rolloutlog.core.scoring*" >mutants/opening.log 2>&1; then
        echo "$0: the opening mutmut run failed (mutants/opening.log ends):" >&2
        tail -n 20 mutants/opening.log >&2
        exit 1
    fi
    names=mutants/sample-$size-seed-$seed.txt
    .venv/bin/python scripts/mutation_sample.py pick "$size" "$seed" >"$names"
    todo=$(.venv/bin/python scripts/mutation_sample.py pending "$names")
    if [[ -n "$todo" ]]; then
        # shellcheck disable=SC2086  # one argument per mutant name
        mutmut run --max-children "${MUTATION_WORKERS:-1}" $todo | tail -n 3
    fi
    .venv/bin/python scripts/mutation_sample.py score "$names" | tee "${names%.txt}.md"
    exit 0
fi

mutmut run --max-children "${MUTATION_WORKERS:-1}" "$@"
mutmut export-cicd-stats
cat mutants/mutmut-cicd-stats.json
echo
mutmut results
