"""`gen run --dry-run` with the bundled model's tokenizer: every prompt as the model would
get it, without loading the model; the run that follows sends exactly those messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gen.backends
from gen.backends.tokens import open_tokenizer
from gen.cli import main
from gen.pipeline.run.dryrun import placeholder

pytestmark = pytest.mark.real_model

PIPELINE = """
name: tea-dry
model: smollm2-135m
defaults: {max_tokens: 6, max_rounds: 1, temperature: 0, seed: 4}
inputs:
  topic: 茶 🍵
  kinds: [green, black]
sections:
  - id: intro
    prompt: "Write one sentence about {{ topic }}."
  - id: kind
    foreach: inputs.kinds
    prompt: "Name one {{ item }} tea."
    context: [previous]
"""


def dry_run_lines(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["run", str(path), "--dry-run", "--events", "-"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_dry_run_shows_what_the_run_then_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tea.yaml"
    path.write_text(PIPELINE, encoding="utf-8")

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a dry run must not load the model")

    with monkeypatch.context() as patch:
        patch.setattr(gen.backends, "open_backend", no_model)
        plans = dry_run_lines(path, capsys)
    assert [p["section"] for p in plans] == ["intro", "kind-1", "kind-2"]
    tokenizer = open_tokenizer("smollm2-135m")
    for plan in plans:
        assert plan["rendered"] == tokenizer.render(plan["messages"])
        assert plan["prompt_tokens"] == tokenizer.count_tokens(plan["messages"])
    assert plans[1]["placeholders"] == [placeholder("intro")]
    assert plans[2]["placeholders"] == [placeholder("kind-1")]

    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    run_dir = next((tmp_path / "out" / "tea-dry").iterdir())
    sent = {
        p.stem: json.loads(p.read_text("utf-8"))["rounds"][0]
        for p in (run_dir / "prompts").iterdir()
    }
    sections = run_dir / "sections"
    for plan in plans:
        messages = json.loads(json.dumps(plan["messages"]))
        for stand_in in plan["placeholders"]:  # what the model wrote, where the plan showed
            key = stand_in.split("'")[1]
            text = (sections / f"{key}.md").read_text("utf-8").strip()
            for m in messages:
                m["content"] = m["content"].replace(stand_in, text)
        assert sent[plan["section"]]["messages"] == messages
        assert sent[plan["section"]]["sampling"]["seed"] == plan["seed"]
    assert "🍵" in sent["intro"]["messages"][-1]["content"]
