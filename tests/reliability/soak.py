"""The soak summary: reliability tests add what they tried (inputs, crashes injected,
requests served, failures) to the file GEN_SOAK_REPORT names; `python -m
tests.reliability.soak FILE` prints the table `make soak` ends with."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections import Counter
from pathlib import Path

KINDS = ("inputs tried", "crashes injected", "requests served", "failures")


def examples(fast: int, soak: int) -> int:
    """How many examples a fuzz test tries: `fast` in `make test`, `soak` under `make soak`
    (GEN_SOAK set), where the cheap ones try many more so the soak passes 10,000 inputs."""
    return soak if os.environ.get("GEN_SOAK") else fast


def record(kind: str, count: int = 1) -> None:
    """Add `count` to `kind` in the report, when there is one (make soak); appends a line
    under a lock, so parallel tests add up."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")
    path = os.environ.get("GEN_SOAK_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"kind": kind, "count": count}) + "\n")


def totals(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter({k: 0 for k in KINDS})
    if path.is_file():
        for line in path.read_text("utf-8").splitlines():
            entry = json.loads(line)
            counts[entry["kind"]] += entry["count"]
    return counts


def main(argv: list[str]) -> int:
    """argv: the report file and pytest's exit status (a failure no test reported, such as
    a collection error, still counts one)."""
    path, status = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 0
    counts = totals(path)
    if status and not counts["failures"]:
        counts["failures"] += 1
    width = max(map(len, KINDS))
    print("\nsoak summary")
    for kind in KINDS:
        print(f"  {kind:<{width}}  {counts[kind]:>8,}")
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
