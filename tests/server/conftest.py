"""A real `gen serve` in a subprocess on 127.0.0.1 (a free port), up once /health answers
(started, polled and stopped by gen.bench.served's running); each real-model test module
starts one and shares it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from gen.bench.served import free_port, running

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


def gen_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gen.cli", *args]


@contextlib.contextmanager
def running_server(*args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """`gen serve ARGS` on a free loopback port until the block ends (SIGTERM, then KILL)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = gen_command("serve", "--port", str(port), *args)
    env = {**os.environ, **(env or {})}
    with running(command, url, "gen serve", START_SECONDS, env) as started:
        yield Server(url, started.process, started.output)


def wait_until(check: Callable[[], bool], what: str, seconds: float = 120) -> None:
    """Poll `check` until it holds; fails (naming `what`) only past a generous deadline."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)
