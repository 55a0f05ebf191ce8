"""One real `gen serve` on the bundled model per test module, and the official client on it."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.server.conftest import Server, running_server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0, timeout=300)
