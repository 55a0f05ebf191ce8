"""A real `gen serve` in a subprocess on 127.0.0.1 (a free port), up once /health answers;
each real-model test module starts one and shares it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

MODEL = "smollm2-135m"
START_SECONDS = 300  # loading (and on a first run converting) the model


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    output: Callable[[], str]  # the server's stderr so far, for failure messages

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def metrics(self) -> dict[str, float]:
        """/metrics' samples by name (the model label dropped)."""
        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name.replace(f'{{model="{MODEL}"}}', "")] = float(value)
        return values


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def gen_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gen.cli", *args]


@contextlib.contextmanager
def running_server(*args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """`gen serve ARGS` on a free loopback port until the block ends (SIGTERM, then KILL)."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            gen_command("serve", "--port", str(port), *args),
            stdout=log,
            stderr=log,
            env={**os.environ, **(env or {})},
        )

        def output() -> str:
            log.seek(0)
            return log.read().decode("utf-8", "replace")

        server = Server(f"http://127.0.0.1:{port}", process, output)

        try:
            _wait_for_health(server)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_health(server: Server) -> None:
    deadline = time.monotonic() + START_SECONDS  # a guard against hanging, not a timing check
    while True:
        if server.process.poll() is not None:
            pytest.fail(f"gen serve exited with {server.process.returncode}:\n{server.output()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                return
        if time.monotonic() > deadline:
            pytest.fail(f"gen serve did not answer /health:\n{server.output()}")
        time.sleep(0.2)


def wait_until(check: Callable[[], bool], what: str, seconds: float = 120) -> None:
    """Poll `check` until it holds; fails (naming `what`) only past a generous deadline."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)
