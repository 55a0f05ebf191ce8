"""What the bench tests share: the repository's bundled pipelines, and `gen bench` on them."""

from __future__ import annotations

from pathlib import Path

from gen.cli import main

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"


def bench(*args: str, out: Path) -> int:
    """`gen bench ARGS`, its documents in `out`, the pipelines the repository's."""
    return main(["bench", *args, "--out", str(out), "--pipelines", str(PIPELINES)])
