"""A small OpenAI-compatible server for the remote backend's fault tests: its reply to any
chat is one fixed multibyte text, streamed a piece per chunk (a "token"), cut at
max_tokens; an open assistant message (continue_final_message) is continued where it
ends. Faults are taken from a queue, one per request: drop the connection mid-stream,
429 with Retry-After, 500, or stall past the client's timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PIECES = [
    "水", "は", "流れ", "る", "。", " The", " river", " 🌊", " runs", " to",
    " the", " sea", ";", " ไทย", " rain", " falls", " on", " 茶", " fields", ".",
    " Salt", " comes", " back", " as", " cloud", " ☁️", " and", " the", " year", " turns",
    ".",
]  # fmt: skip
# a prompt about rain gets its own text (gen cuts a section that says an earlier one again)
RAIN = [
    "雨", "が", "降", "る", "。", " Clouds", " gather", " over", " the", " ไทย", " hills",
    " 🌧️", " and", " drops", " drum", " on", " tin", " roofs", " until", " dawn", ".",
]  # fmt: skip


@dataclass
class FaultServer:
    faults: list[str] = field(default_factory=list)  # drop | 429 | 500 | stall | filter | ok
    requests: list[dict[str, Any]] = field(default_factory=list)
    stall_seconds: float = 5.0
    refuse_prefix: bool = False  # answer an open assistant message with a 400, as OpenAI does
    url: str = ""

    def reply(self, body: dict[str, Any]) -> tuple[list[str], bool]:
        """The pieces this request gets, and whether that is the whole reply."""
        start = 0
        messages = body["messages"]
        asked = next(m["content"] for m in messages if m["role"] == "user")
        pieces = RAIN if "rain" in asked else PIECES
        if body.get("continue_final_message") and messages[-1]["role"] == "assistant":
            prefix, text = messages[-1]["content"], ""
            while start < len(pieces) and len(text) < len(prefix):
                text += pieces[start]
                start += 1
            if text != prefix:
                raise ValueError(f"the prefix {prefix!r} is not a start of the reply")
        rest = pieces[start:]
        return rest[: body["max_tokens"]], len(rest) <= body["max_tokens"]

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        fault = self.faults.pop(0) if self.faults else "ok"
        self.requests.append({"body": body, "fault": fault})
        if fault == "429":
            return JSONResponse({"error": {"message": "slow down"}}, 429, {"Retry-After": "1"})
        if fault == "500":
            return JSONResponse({"error": {"message": "boom"}}, 500)
        if self.refuse_prefix and body.get("continue_final_message"):
            return JSONResponse({"error": {"message": "continue_final_message?"}}, 400)
        pieces, whole = self.reply(body)

        async def stream() -> AsyncIterator[bytes]:
            for n, piece in enumerate(pieces):
                if fault == "drop" and n == 3:
                    raise ConnectionResetError("dropped by the fault server")
                if fault == "stall" and n == 3:
                    await asyncio.sleep(self.stall_seconds)
                if fault == "filter" and n == 2:
                    yield chunk({}, "content_filter")
                    yield b"data: [DONE]\n\n"
                    return
                yield chunk({"content": piece}, None)
            yield chunk({}, "stop" if whole else "length")
            usage = {"prompt_tokens": 10, "completion_tokens": len(pieces)}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")


def chunk(delta: dict[str, str], finish: str | None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'choices': [choice]}, ensure_ascii=False)}\n\n".encode()


@contextlib.contextmanager
def running(server: FaultServer) -> Iterator[FaultServer]:
    """The server on a free loopback port, in a thread, for the block."""
    app = Starlette(routes=[Route("/v1/chat/completions", server.chat, methods=["POST"])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the fault server did not start")
        time.sleep(0.02)
    server.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
