"""How gen loads a model, measured in a process of its own: seconds from nothing to a model
ready to decode, and resident memory then and at its peak. The bench's own process holds
Hugging Face's copy of the weights beside ours, so its memory says nothing about gen's.

`python -m gen.bench.load SPEC [DTYPE]` prints one JSON object; `measure()` runs it twice
and keeps the second (warm: the tokenizer converted and the kernels built by the first).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gen.bench.peers import process_memory


def measure(model: str, dtype: str | None, runs: int = 2) -> dict[str, Any]:
    """The last of `runs` loads, each in a fresh process: load_seconds, rss_mb, peak_rss_mb,
    model_rss_mb (rss_mb less the process's before the load, torch imported), and the GGUF
    file's size where the model is one (file_mb)."""
    command = [sys.executable, "-m", "gen.bench.load", model, *([dtype] if dtype else [])]
    figures: dict[str, Any] = {}
    for _ in range(runs):
        done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=900)
        figures = json.loads(done.stdout.splitlines()[-1])
    return figures


def main(model: str, dtype: str | None) -> dict[str, Any]:
    start = time.perf_counter()
    from gen.engine.config import EngineConfig
    from gen.models import load_model
    from gen.models.store import resolve

    spec = resolve(model)
    base = process_memory().get("rss_mb", 0.0)
    loaded = load_model(spec, EngineConfig.from_env(dtype=dtype))
    figures: dict[str, Any] = {"load_seconds": round(time.perf_counter() - start, 2)}
    figures |= process_memory()
    # the model's own share: what loading it added to a process that had imported the
    # engine (and so torch)
    figures["model_rss_mb"] = round(figures.get("rss_mb", 0.0) - base, 1)
    figures["dtype"] = loaded.dtype
    if spec.kind == "gguf" and spec.path is not None:
        figures["file_mb"] = round(Path(spec.path).stat().st_size / 2**20, 1)
    return figures


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m gen.bench.load SPEC [DTYPE]")
    print(json.dumps(main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)))
