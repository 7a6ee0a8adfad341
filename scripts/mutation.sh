#!/usr/bin/env bash
# Mutation testing of rolloutlog/core/ by the property tests alone (the selection and the
# hand-written tests left out are in pyproject.toml, [tool.mutmut]). Each mutant runs the
# properties that reach it under HYPOTHESIS_PROFILE=mutation (25 fixed examples each).
# Needs the `mutation` extra. Results stay in mutants/ (ignored by git); the score is in
# mutants/mutmut-cicd-stats.json and the survivors are listed at the end. docs/testing.md
# has the last measured score.
#
#   scripts/mutation.sh                           # every mutant of rolloutlog/core/
#   scripts/mutation.sh "rolloutlog.core.sink*"   # only these (mutmut's mutant names)
#
# MUTATION_WORKERS (default 1) sets the parallel workers; on a shared machine keep it low.
set -euo pipefail
cd "$(dirname "$0")/.."
export HYPOTHESIS_PROFILE=mutation
nice -n 10 .venv/bin/mutmut run --max-children "${MUTATION_WORKERS:-1}" "$@"
.venv/bin/mutmut export-cicd-stats
cat mutants/mutmut-cicd-stats.json
echo
.venv/bin/mutmut results
