"""gen.bench.served.running, which starts the tests' gen serve: a server that exits before it
answers /health fails at once, with its exit code and its output."""

from __future__ import annotations

import sys

import pytest

from gen.bench.served import free_port, running


def test_a_server_that_exits_is_reported_with_its_output() -> None:
    command = [sys.executable, "-c", "import sys; sys.exit('no model here')"]
    url = f"http://127.0.0.1:{free_port()}"
    with (
        pytest.raises(RuntimeError, match="fake serve exited with 1:\nno model here"),
        running(command, url, "fake serve", start_seconds=60),
    ):
        pytest.fail("it never came up")
