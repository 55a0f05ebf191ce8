"""The figures of docs/sources.md: pipelines/report-from-sources.yaml run over several seeds
with a model, and for each run how many of the facts each section's prompt asks for its text
states, the model's own citations, gen's, and how far the model's are borne out.

    .venv/bin/python tools/measure_sources.py [--seeds 1,2,3,4,5] [--model SPEC]

Each run goes through `gen run` in a folder of its own under a temporary directory."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "report-from-sources.yaml"
# what each section's prompt asks for, as the corpus states it (tests/sources/facts.py)
ASKED = {
    "network": ["48.7 million", "118 stops", "12 December 2025"],
    "extension": ["14 March 2025", "61.4 million", "58.0 million"],
    "people": ["1,140", "86 new drivers", "Lindqvist T9"],
    "outlook": ["Line 3", "Saltmarsh", "fare cap"],
}


def measure(seed: int, model: str | None, out: Path) -> dict[str, object]:
    text = PIPELINE.read_text(encoding="utf-8").replace("seed: 7", f"seed: {seed}")
    pipeline = PIPELINE.with_name(f"_measure-{seed}.yaml")  # beside its sources
    pipeline.write_text(text, encoding="utf-8")
    try:
        command = [sys.executable, "-m", "gen.cli", "run", str(pipeline), "--out", str(out)]
        if model:
            command += ["--model", model]
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    finally:
        pipeline.unlink()
    run_dir = Path(done.stdout.strip().splitlines()[-1]).parent
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    stated = 0
    for section, facts in ASKED.items():
        written = (run_dir / "sections" / f"{section}.md").read_text(encoding="utf-8")
        stated += sum(fact in written for fact in facts)
    return {"seed": seed, "facts": stated, "asked": sum(map(len, ASKED.values())),
            **manifest["citations"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        rows = [measure(int(s), args.model, Path(out)) for s in args.seeds.split(",")]
    for row in rows:
        print(json.dumps(row))
    total = lambda key: sum(int(r[key] or 0) for r in rows)  # noqa: E731
    print(
        f"{len(rows)} runs: {total('facts')} of {total('asked')} asked facts stated, "
        f"{total('model_citations')} citations by the model, {total('attributed')} by gen, "
        f"{total('references')} references, {total('unsupported_facts')} sentences with "
        "an unsupported figure or name"
    )


if __name__ == "__main__":
    main()
