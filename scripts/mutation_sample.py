"""A seeded, uniform sample of mutmut's mutants, and its score per module with a 95% interval.

Why: the core has some 3,000 mutants, too many to run on a small machine; a uniformly
random sample estimates the killed fraction of all of them, and the Wilson interval says how
far the estimate can be off. Used by scripts/mutation.sh (--sample N --seed S); reads the
mutants mutmut generated under mutants/ (each source file's `.meta` file lists its mutants
and, once run, their exit codes).

    python scripts/mutation_sample.py pick N SEED    # N names, one a line
    python scripts/mutation_sample.py pending FILE   # those of FILE not run yet
    python scripts/mutation_sample.py score FILE     # the table for the names in FILE
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

META_GLOB = "rolloutlog/core/**/*.py.meta"  # the rule families of core/rules too
Z95 = 1.959964
# mutmut's exit codes (mutmut/stats.py); anything else is reported by its number
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests"}
STATUS.update({code: "timeout" for code in (36, -24, 24, 152)})
# 255: mutmut's run of the mutant raised. Under the fork server (`[tool.mutmut]`) that is
# pytest's usage error: a property's module failed to import under the mutant (a pinned
# `@example` is computed at import, and the mutant crashed it), so none of the tests mutmut
# named was found. mutmut files it as a timeout; here it is a failure of the properties.
STATUS[255] = "broke collection"
STATUS.update({None: "not run", 37: "caught by type check", 34: "skipped", 35: "suspicious"})
CAUGHT = ("killed", "timeout", "broke collection")  # what the score counts as caught


def exit_codes(root: Path) -> dict[str, int | None]:
    """Every mutant of the core by name, with its exit code (None: not run yet)."""
    codes: dict[str, int | None] = {}
    for meta in sorted(root.glob(META_GLOB)):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    if not codes:
        raise SystemExit(f"no mutants under {root}/{META_GLOB}: let mutmut generate them first")
    return codes


def pick(codes: dict[str, int | None], size: int, seed: int) -> list[str]:
    """A uniform sample without replacement: the first `size` of a seeded shuffle, so that
    for one seed a larger sample extends a smaller one (a cut-short run can be resumed)."""
    names = sorted(codes)
    if not 0 < size <= len(names):
        raise SystemExit(f"sample size must be between 1 and {len(names)}, got {size}")
    random.Random(seed).shuffle(names)
    return sorted(names[:size])


def pending(codes: dict[str, int | None], names: list[str]) -> list[str]:
    """The names mutmut has no verdict for yet (it clears a verdict when its code changes)."""
    return [name for name in names if codes.get(name) is None]


def module_of(name: str) -> str:
    """`rolloutlog.core.sink.xǁSinkǁdecide__mutmut_3` -> `sink`,
    `rolloutlog.core.rules.admission.x_areal_left__mutmut_1` -> `rules.admission`."""
    return ".".join(name.split(".")[2:-1])


def wilson(killed: int, total: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a binomial proportion (sound at 0 and 1 too)."""
    if total == 0:
        return 0.0, 1.0
    share = killed / total
    scale = 1 + Z95**2 / total
    centre = (share + Z95**2 / (2 * total)) / scale
    half = Z95 * math.sqrt(share * (1 - share) / total + Z95**2 / (4 * total**2)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def score(codes: dict[str, int | None], names: list[str]) -> str:
    """A markdown table: per module and in all, killed of sampled, the share and interval.

    A timeout counts as killed (the mutant made a property hang), and so does a mutant that
    broke the collection of a property's module; every other verdict, `no tests` and
    `not run` included, counts against the score.
    """
    unknown = [name for name in names if name not in codes]
    if unknown:
        raise SystemExit(f"not mutants of the current core (regenerated since?): {unknown[:3]}")
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    for name in names:
        status = STATUS.get(codes[name], f"exit {codes[name]}")
        rows[module_of(name)][status] += 1
        rows["all of core"][status] += 1
    lines = [
        "| module | sampled | killed | timeout | broke collection | survived | other"
        " | killed share | 95% interval |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for module in [*sorted(m for m in rows if m != "all of core"), "all of core"]:
        counts = rows[module]
        total = sum(counts.values())
        detected = sum(counts[status] for status in CAUGHT)
        other = total - detected - counts["survived"]
        low, high = wilson(detected, total)
        lines.append(
            f"| {module} | {total} | {counts['killed']} | {counts['timeout']} |"
            f" {counts['broke collection']} | {counts['survived']} | {other} |"
            f" {detected / total:.1%} | {low:.1%}-{high:.1%} |"
        )
    survivors = [n for n in names if STATUS.get(codes[n], "") not in CAUGHT]
    lines += ["", f"not killed ({len(survivors)}):"]
    lines += [f"  {n}: {STATUS.get(codes[n], f'exit {codes[n]}')}" for n in survivors]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    root = Path("mutants")
    if len(argv) == 3 and argv[0] == "pick":
        print("\n".join(pick(exit_codes(root), int(argv[1]), int(argv[2]))))
    elif len(argv) == 2 and argv[0] in ("score", "pending"):
        names = Path(argv[1]).read_text().split()
        codes = exit_codes(root)
        print(score(codes, names) if argv[0] == "score" else "\n".join(pending(codes, names)))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
