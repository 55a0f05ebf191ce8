"""A text chunk written from its template (TextStamp) is byte for byte the chunk pydantic
writes, whatever the text holds: quotes, backslashes, control characters, line breaks,
multibyte text."""

from __future__ import annotations

import json

import pytest

from gen.backends.base import Delta
from gen.server.openai.chat import ChatChunks
from gen.server.openai.completions import TextChunks
from gen.server.openai.responses import (
    ChatChunkChoice,
    ChatCompletionChunk,
    ChunkDelta,
    Completion,
    CompletionChoice,
)

TEXTS = [
    "",
    "plain",
    '"quoted" \\ back\\slash /slash',
    "line\nbreak\r\ttab\b\f",
    "\x00\x01\x1f\x7f",
    "春天来了 🌸 ภาษาไทย",
    "\u2028\u2029 separators",
    "\ufffd half",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_chat_text_chunk_is_what_pydantic_writes(text: str) -> None:
    chunks = ChatChunks("smollm2-135m", lambda i: b"", logprobs=False)
    (sent,) = chunks.piece(Delta(text))
    choice = ChatChunkChoice(delta=ChunkDelta(content=text))
    want = ChatCompletionChunk(
        id=chunks.id, created=chunks.created, model="smollm2-135m", choices=[choice]
    )
    assert sent == want.model_dump_json()
    assert json.loads(sent)["choices"][0]["delta"] == {"content": text}


@pytest.mark.parametrize("text", TEXTS)
def test_a_completion_text_chunk_is_what_pydantic_writes(text: str) -> None:
    chunks = TextChunks(("cmpl-1", 7, "m"), 2, lambda i: b"", False, "", [])
    (sent,) = chunks.piece(Delta(text))
    want = Completion(
        id="cmpl-1", created=7, model="m", choices=[CompletionChoice(index=2, text=text)]
    )
    assert sent == want.model_dump_json()
    assert json.loads(sent)["choices"][0]["text"] == text
