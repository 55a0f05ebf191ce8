"""Token counting for remote models: tiktoken's cl100k from the installed package, with no
network at all; or the model's own Hugging Face tokenizer when `tokenizer:` names one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

OFFLINE = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network unavailable (test)")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from gen.backends.openai import TokenCounter
counter = TokenCounter()
thai = [{"role": "user", "content": "ไทย"}]
print(counter.text("水は流れる 🌊 and the sea"), counter.messages(thai))
"""


def test_tiktoken_counts_with_the_network_unavailable(tmp_path: Path) -> None:
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}  # nothing cached
    r = subprocess.run([sys.executable, "-c", OFFLINE], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    text, messages = (int(n) for n in r.stdout.split())
    assert text > 5 and messages > 4


@pytest.mark.real_model
def test_a_named_tokenizer_counts_as_the_model_does() -> None:
    from transformers import AutoTokenizer

    from gen.backends.openai import TokenCounter
    from gen.models.store import prepare

    folder = str(prepare("smollm2-135m"))
    counter = TokenCounter(folder)
    own = AutoTokenizer.from_pretrained(folder)
    text = "水は流れる 🌊 and ไทย rain"
    assert counter.text(text) == len(own.encode(text, add_special_tokens=False))
    messages = [{"role": "user", "content": text}]
    assert counter.messages(messages) == len(
        own.apply_chat_template(messages, add_generation_prompt=True)
    )
    assert counter.text(text) != TokenCounter().text(text)  # not cl100k's count
