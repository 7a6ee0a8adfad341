#!/usr/bin/env bash
# Behaviour unchanged, event for event: the working tree's `simulate --json`, `--log` file and
# `export` output on every built-in scenario and on the field set (`--compare field`), compared
# byte for byte with those of a base revision (default 5b6a10f). A refactor runs this before
# each commit; any difference is listed and the exit status is 1.
#
#   scripts/same_behaviour.sh [BASE]        PYTHON=... to pick the interpreter (.venv/bin/python)
#
# The base's outputs are written once into $SAME_CACHE/<commit>/ (default under /tmp) from
# `git archive BASE`, run by the same interpreter with PYTHONPATH at that tree.
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
base=$(git -C "$root" rev-parse --verify "${1:-5b6a10f}^{commit}")
python=${PYTHON:-$root/.venv/bin/python}
cache=${SAME_CACHE:-/tmp/rolloutlog-same}/$base

# outputs SOURCE_TREE OUT_DIR: every run's report, log and export, written under OUT_DIR.
outputs() {
    local src=$1 out=$2 scenario name log
    mkdir -p "$out"
    # Relative --log paths, run inside OUT_DIR: the reports name their logs alike.
    run() { (cd "$out" && PYTHONPATH="$src" "$python" -m rolloutlog "$@"); }
    for scenario in "$src"/rolloutlog/runtime/sim/scenarios/*.toml; do
        name=$(basename "$scenario" .toml)
        run simulate --scenario "$name" --json --log "$name.arrow" >"$out/$name.json"
    done
    run simulate --compare field --json --log field.arrow >"$out/field.json"
    for log in "$out"/*.arrow; do
        run export "$(basename "$log")" >"${log%.arrow}.jsonl"
    done
}

if [[ ! -f $cache/done ]]; then
    rm -rf "$cache"
    mkdir -p "$cache/src"
    git -C "$root" archive "$base" | tar -x -C "$cache/src"
    outputs "$cache/src" "$cache/out"
    touch "$cache/done"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
outputs "$root" "$work"

status=0
expected=$(cd "$cache/out" && ls)
found=$(cd "$work" && ls)
missing=$(comm -23 <(echo "$expected") <(echo "$found"))
added=$(comm -13 <(echo "$expected") <(echo "$found"))
if [[ -n $missing ]]; then
    echo "missing here:" $missing
    status=1
fi
if [[ -n $added ]]; then  # a scenario the base did not have: nothing to compare it with
    echo "new, not compared:" $added
fi
for file in $expected; do
    if [[ -f $work/$file ]] && ! cmp -s "$cache/out/$file" "$work/$file"; then
        echo "differs: $file"
        status=1
    fi
done
count=$(echo "$expected" | wc -w)
if [[ $status == 0 ]]; then
    echo "same behaviour as ${base:0:7}: $count files byte for byte"
fi
exit $status
