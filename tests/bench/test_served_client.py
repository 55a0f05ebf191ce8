"""The bench's bare HTTP client (gen.bench.served._Answer): an SSE answer's `data:`
fields however its bytes are split as they come off the socket."""

from __future__ import annotations

import json
import random
import re

import pytest

from gen.bench.served import ServedError, _Answer

EVENTS = [{"choices": [{"delta": {"content": piece}}]} for piece in ("春天", " 🌸", "สวัสดี", "\n\n")]


def chunked_answer() -> bytes:
    events = [json.dumps(e, ensure_ascii=False).encode() for e in EVENTS]
    body = b"".join(b"data: " + e + b"\n\n" for e in events)
    body += b"data: [DONE]\n\n"
    chunks = [body[i : i + 37] for i in range(0, len(body), 37)]  # chunks cut mid-character
    framed = b"".join(b"%x\r\n" % len(c) + c + b"\r\n" for c in chunks) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    return head + framed


def fed(answer: _Answer, raw: bytes, cuts: list[int]) -> list[bytes]:
    lines: list[bytes] = []
    for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        lines += answer.feed(raw[a:b])
    return lines


@pytest.mark.parametrize("seed", range(6))
def test_every_event_comes_whole_however_the_bytes_are_split(seed: int) -> None:
    raw = chunked_answer()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(raw)), 40 if seed else len(raw) - 1))  # 0: bytewise
    answer = _Answer("http://127.0.0.1:1/v1")
    lines = fed(answer, raw, cuts)
    assert answer.ended  # at the last chunk, before the server closes
    assert [json.loads(line) for line in lines[:-1]] == EVENTS and lines[-1] == b"[DONE]"


def test_an_answer_that_breaks_off_or_refuses_says_so() -> None:
    raw = chunked_answer()
    cut = _Answer("http://x/v1")
    cut.feed(raw[: len(raw) // 2])
    with pytest.raises(ServedError, match="broke off mid-answer"):
        cut.feed(b"")
    with pytest.raises(ServedError, match="broke off before its answer"):
        _Answer("http://x/v1").feed(b"")
    refused = _Answer("http://x/v1")
    error = b'{"error": {"message": "max_tokens: too many"}}'
    assert refused.feed(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 46\r\n\r\n" + error) == []
    with pytest.raises(ServedError, match=re.escape('answered 400: {"error": {"message": "max')):
        refused.feed(b"")
