"""With the bundled model: the context a pipeline names reaches the model (the quickstart's
`steps` sees the introduction), and fan-out instances with one pipeline seed differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.cli import main

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parent.parent


def run_dir_of(out: Path) -> Path:
    (pipeline,) = out.iterdir()
    (run,) = pipeline.iterdir()
    return run


def test_the_quickstart_steps_prompt_holds_the_introduction(tmp_path: Path) -> None:
    quick = ["--set", "defaults.max_tokens=24", "--set", "defaults.max_rounds=1"]
    args = ["run", str(ROOT / "pipelines" / "quickstart.yaml"), "--out", str(tmp_path), *quick]
    assert main(args) == 0
    run = run_dir_of(tmp_path)
    intro = (run / "sections" / "introduction.md").read_text("utf-8").strip()
    assert intro
    steps = json.loads((run / "prompts" / "steps.json").read_text("utf-8"))
    user = steps["rounds"][0]["messages"][-1]["content"]
    assert intro in user
    assert user.index(intro) < user.index("Explain, step by step")


def test_fan_out_instances_with_one_seed_differ(tmp_path: Path) -> None:
    pipeline = tmp_path / "same.yaml"
    pipeline.write_text(
        """
name: same
defaults: {max_tokens: 24, max_rounds: 1, temperature: 0.8, seed: 7}
inputs:
  items: [茶 🍵, 茶 🍵, 茶 🍵]
sections:
  - id: part
    foreach: inputs.items
    prompt: "Write two sentences about {{ item }}."
""",
        encoding="utf-8",
    )
    assert main(["run", str(pipeline), "--out", str(tmp_path / "out")]) == 0
    run = run_dir_of(tmp_path / "out")
    texts = [(run / "sections" / f"part-{i}.md").read_text("utf-8") for i in (1, 2, 3)]
    assert len(set(texts)) == 3  # same prompt, same pipeline seed, three different parts
    manifest = json.loads((run / "manifest.json").read_text("utf-8"))
    seeds = [s["seed"] for s in manifest["sections"]]
    assert len(set(seeds)) == 3
    again = tmp_path / "again"
    assert main(["run", str(pipeline), "--out", str(again)]) == 0
    rerun = run_dir_of(again)
    assert [(rerun / "sections" / f"part-{i}.md").read_text("utf-8") for i in (1, 2, 3)] == texts
