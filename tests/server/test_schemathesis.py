"""Schemathesis against a real `gen serve`'s /openapi.json, on loopback and bounded: a
small window keeps every generation short, few examples per operation, one worker. It must
find no server error and no response outside the published schema.

The coverage phase (boundary values of every field, about 800 requests, minutes on two
cores) runs with GEN_TEST_SCHEMATHESIS_PHASES=examples,coverage,fuzzing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Server, running_server

pytestmark = pytest.mark.real_model

CHECKS = (
    "not_a_server_error",
    "response_schema_conformance",
    "status_code_conformance",
    "content_type_conformance",
)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    # a 40-token window: the chat template's prompt leaves a few tokens to generate
    with running_server("--max-model-len", "40") as s:
        yield s


def test_no_server_error_and_no_schema_violation(server: Server, tmp_path: Path) -> None:
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
            "--request-timeout",
            "120",
            "--no-color",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "No issues found" in done.stdout
