"""Schemathesis against a real `gen serve`'s /openapi.json, on loopback and bounded: a
small window keeps every generation short, a one-section pipeline of three tokens keeps
every run short (so a run's event stream, which ends with the run, is short too), few
examples per operation, one worker. It must find no server error and no response outside
the published schema, on the OpenAI endpoints and the runs API alike.

Path parameters are drawn half the time from real runs (one completed, one cancelled) and
the pipeline of a new run half the time from the real one, by name or as YAML text.

The coverage phase (boundary values of every field, about 800 requests, minutes on two
cores) runs with GEN_TEST_SCHEMATHESIS_PHASES=examples,coverage,fuzzing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Server, running_server, wait_until

pytestmark = pytest.mark.real_model

CHECKS = (
    "not_a_server_error",
    "response_schema_conformance",
    "status_code_conformance",
    "content_type_conformance",
)
# 20 prompt tokens and 3 to generate: it fits the 40-token window with room to spare
PIPELINE = """\
# One short section.
name: tiny
defaults: {max_tokens: 3, max_rounds: 1, temperature: 0, system: Be brief.}
context: {window: auto, reserve: 4}
inputs:
  topic: tea
sections:
  - id: a
    prompt: "{{ topic }}?"
"""
# st's warnings, all but validation_mismatch (valid data mostly refused): a run resumes
# once, and after that a resume is a 409 whatever the body. Schema violations are failures
# (CHECKS), not warnings.
SHOWN_WARNINGS = (
    "missing_auth",
    "missing_test_data",
    "base_url_mismatch",
    "missing_deserializer",
    "unsupported_regex",
    "method_not_allowed",
    "unresolvable_reference",
    "dictionary_mismatch",
)
RUNS_API = (
    "GET /v1/pipelines",
    "POST /v1/runs",
    "GET /v1/runs",
    "GET /v1/runs/{run_id}",
    "GET /v1/runs/{run_id}/events",
    "GET /v1/runs/{run_id}/document",
    "GET /v1/runs/{run_id}/timeline.svg",
    "POST /v1/runs/{run_id}/resume",  # (cancel: every run here is over by then, a 409)
)
REQUEST_TIMEOUT = 120  # a guard against a hang: every answer here takes seconds at most
EVENTS_TIMEOUT = 30  # a run's events end with the run, which takes a second or so


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("schemathesis")
    (folder / "pipelines").mkdir()
    (folder / "pipelines" / "tiny.yaml").write_text(PIPELINE, "utf-8")
    # a 40-token window: the chat template's prompt leaves a few tokens to generate
    args = ["--max-model-len", "40", "--pipelines", str(folder / "pipelines")]
    args += ["-o", str(folder / "out"), "--max-runs", "1", "--max-run-queue", "2"]
    with running_server(*args) as s:
        yield s


def _status(server: Server, run_id: str) -> str:
    status: str = httpx.get(f"{server.v1}/runs/{run_id}", timeout=30).json()["status"]
    return status


def _runs(server: Server) -> list[str]:
    """A completed run and a cancelled one (cancelled while queued behind the first)."""
    ids = []
    for _ in range(2):
        r = httpx.post(f"{server.v1}/runs", json={"pipeline": "tiny"}, timeout=30)
        assert r.status_code == 201, r.text
        ids.append(r.json()["run_id"])
    cancelled = httpx.post(f"{server.v1}/runs/{ids[1]}/cancel", json={}, timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    wait_until(lambda: _status(server, ids[0]) == "completed", "the first run completes")
    assert _status(server, ids[1]) == "cancelled"
    return ids


def _config(run_ids: list[str]) -> str:
    """schemathesis.toml: values to draw parameters from, and the event stream's timeout
    (JSON strings are TOML strings)."""
    return f"""\
request-timeout = {REQUEST_TIMEOUT}
warnings = {json.dumps(SHOWN_WARNINGS)}

[dictionaries.run_ids]
values = {json.dumps(run_ids)}

[dictionaries.pipelines]
values = {json.dumps(["tiny", PIPELINE])}

[parameters]
"path.run_id" = {{ dictionary = "run_ids", probability = 0.5 }}
"body.pipeline" = {{ dictionary = "pipelines", probability = 0.5 }}

[[operations]]
include-path = "/v1/runs/{{run_id}}/events"
request-timeout = {EVENTS_TIMEOUT}
"""


def test_no_server_error_and_no_schema_violation(server: Server, tmp_path: Path) -> None:
    (tmp_path / "schemathesis.toml").write_text(_config(_runs(server)), "utf-8")
    st = Path(sys.executable).parent / "st"
    done = subprocess.run(
        [
            str(st),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            ",".join(CHECKS),
            "--phases",
            os.environ.get("GEN_TEST_SCHEMATHESIS_PHASES", "examples,fuzzing"),
            "--max-examples",
            "15",
            "--seed",
            "1",
            "--workers",
            "1",
            "--no-color",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            "report.ndjson",
        ],
        cwd=tmp_path,  # where st finds schemathesis.toml
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "No issues found" in done.stdout, done.stdout
    answered = _statuses(tmp_path / "report.ndjson")
    for operation in (*RUNS_API, "POST /v1/responses"):  # reached, not only refused
        assert any(200 <= s < 300 for s in answered[operation]), (operation, answered)


def _statuses(report: Path) -> dict[str, set[int]]:
    """Each operation's response statuses, from st's NDJSON report."""
    statuses: dict[str, set[int]] = {}
    for line in report.read_text("utf-8").splitlines():
        finished = json.loads(line).get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished.get("recorder", {})
        for interaction in recorder.get("interactions", {}).values():
            response = interaction.get("response") or {}
            if "status_code" in response:
                statuses.setdefault(recorder["label"], set()).add(response["status_code"])
    return statuses
