"""The `openai:` backend against a server that fails on purpose: dropped streams, 429 with
Retry-After, 500 and stalls are tried again (a round cut off mid-stream goes on from the
text received), so every section's text equals a clean run's, and the manifest counts
the retries; a server that keeps failing fails the section, naming the retries; a
content filter ends the section visibly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gen.pipeline import load_pipeline_text

from .fault_server import PIECES, FaultServer, running
from .remote import run_remote

PIPELINE = """
name: remote
model: openai:fake
base_url: {url}
remote: {{timeout: 1, max_retries: {retries}}}
defaults: {{max_tokens: 8, max_rounds: 6, temperature: 0, seed: 1, continuation: prefix}}
sections:
  - {{id: first, prompt: "Write about water."}}
  - {{id: second, prompt: "Write about rain.", depends_on: [first]}}
"""


def run_pipeline(
    server: FaultServer, out: Path, retries: int = 6, mode: str = "prefix"
) -> dict[str, Any]:
    text = PIPELINE.format(url=server.url, retries=retries).replace("prefix", mode)
    pipeline = load_pipeline_text(text, file="remote.yaml")
    return run_remote(pipeline, out)


def texts(out: Path, manifest: dict[str, Any]) -> dict[str, str]:
    folder = out / "remote" / manifest["run_id"] / "sections"
    return {s["id"]: (folder / f"{s['id']}.md").read_text("utf-8") for s in manifest["sections"]}


def test_faults_are_retried_and_the_text_is_a_clean_runs(tmp_path: Path) -> None:
    with running(FaultServer()) as clean:
        clean_manifest = run_pipeline(clean, tmp_path / "clean")
    expected = texts(tmp_path / "clean", clean_manifest)
    assert expected["first"] == "".join(PIECES)  # four rounds of 8 pieces, joined seamlessly
    assert clean_manifest["metrics"]["server_retries"] == 0

    faults = ["429", "drop", "500", "stall", "ok", "drop", "ok", "drop"]
    with running(FaultServer(faults=list(faults), stall_seconds=3)) as faulty:
        manifest = run_pipeline(faulty, tmp_path / "faulty")
        seen = [r["fault"] for r in faulty.requests]
    assert manifest["status"] == "completed"
    assert texts(tmp_path / "faulty", manifest) == expected
    assert seen[: len(faults)] == faults  # every fault was met
    retries = [r.get("server_retries", 0) for s in manifest["sections"] for r in s["rounds"]]
    assert sum(retries) == manifest["metrics"]["server_retries"] == 6
    # a round cut off mid-stream went on as an open assistant message, from what it had
    resumed = [r["body"] for r in faulty.requests if r["body"].get("continue_final_message")]
    assert resumed and all(b["messages"][-1]["role"] == "assistant" for b in resumed)
    assert {r["replica"] for s in manifest["sections"] for r in s["rounds"]} == {faulty.url}


def test_a_server_that_will_not_continue_mid_stream_ends_the_round_cut_off(
    tmp_path: Path,
) -> None:
    server = FaultServer(faults=["drop"], refuse_prefix=True)
    with running(server):
        manifest = run_pipeline(server, tmp_path, mode="chat")
    first = manifest["sections"][0]["rounds"]
    assert first[0]["finish_reason"] == "length" and first[0]["stop_reason"] == "interrupted"
    assert first[0]["completion_tokens"] == 3  # what came before the drop is kept
    assert first[1]["strategy"] == "chat"  # the section went on by its own continuation
    assert manifest["status"] == "completed"


def test_a_server_that_keeps_failing_fails_the_section_naming_the_retries(
    tmp_path: Path,
) -> None:
    with running(FaultServer(faults=["500"] * 10)) as server:
        manifest = run_pipeline(server, tmp_path, retries=2)
        assert len(server.requests) == 3
    assert manifest["status"] == "failed"
    first = manifest["sections"][0]
    assert first["status"] == "failed" and "after 2 retries" in first["error"]
    assert "answered 500" in first["error"]


def test_a_content_filter_ends_the_section_visibly(tmp_path: Path) -> None:
    with running(FaultServer(faults=["filter"])) as server:
        manifest = run_pipeline(server, tmp_path)
    first = manifest["sections"][0]
    assert first["ended_by"] == "content_filter" and first["status"] == "completed"
    assert first["rounds"][-1]["finish_reason"] == "content_filter"
    assert texts(tmp_path, manifest)["first"] == "".join(PIECES[:2])


@pytest.mark.parametrize(("value", "low", "high"), [("3", 3, 3), (None, 0, 0.5), ("soon", 0, 0.5)])
def test_backoff_honours_retry_after(value: str | None, low: float, high: float) -> None:
    from gen.backends.replicas import backoff

    assert low <= backoff(1, value) <= high
