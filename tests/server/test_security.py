"""A real `gen serve` with a key (from GEN_API_KEY): 401 without it, 200 with it; binding
beyond loopback without a key is refused before the model loads."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.server.conftest import MODEL, Server, gen_command, running_server

KEY = "test-key-123"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server("--max-model-len", "256", env={"GEN_API_KEY": KEY}) as s:
        yield s


@pytest.mark.real_model
def test_v1_needs_the_key(server: Server) -> None:
    missing = httpx.get(f"{server.v1}/models", timeout=30)
    wrong = httpx.get(f"{server.v1}/models", headers={"Authorization": "Bearer nope"}, timeout=30)
    good = httpx.get(f"{server.v1}/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert missing.status_code == wrong.status_code == 401
    assert set(missing.json()["error"]) == {"message", "type", "param", "code"}
    assert good.status_code == 200 and good.json()["data"][0]["id"] == MODEL
    assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200


@pytest.mark.real_model
def test_the_openai_client_with_and_without_the_key(server: Server) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    anonymous = openai.OpenAI(base_url=server.v1, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        anonymous.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)  # type: ignore[arg-type]
    client = openai.OpenAI(base_url=server.v1, api_key=KEY, max_retries=0)
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)  # type: ignore[arg-type]
    assert r.choices[0].finish_reason in ("stop", "length")


def test_a_public_bind_without_a_key_is_refused() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GEN_API_KEY"}
    done = subprocess.run(
        gen_command("serve", "--host", "0.0.0.0", "--port", "9"),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without an API key" in done.stderr
    assert "--api-key" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-slots", "0"], "--max-slots must be positive"),
        (["--max-body-mb", "0"], "--max-body-mb must be positive"),
        (["--model", "openai:gpt-4o"], "gen serve runs a local model"),
    ],
)
def test_bad_options_exit_2_before_serving(args: list[str], message: str) -> None:
    done = subprocess.run(
        gen_command("serve", "--port", "9", *args), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
