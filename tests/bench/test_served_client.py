"""The bench's bare HTTP client (gen.bench.served._Answer): an SSE answer's `data:`
fields however its bytes are split as they come off the socket."""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import threading

import pytest

from gen.bench.served import Client, ServedError, _Answer

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
    error = b'{"error": {"message": "max_tokens: too many"}}'
    head = b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n" % len(error)
    refused = _Answer("http://x/v1")
    assert refused.feed(head + error[:10]) == []  # (its length says more is to come)
    with pytest.raises(ServedError, match=re.escape('answered 400: {"error": {"message": "max')):
        refused.feed(error[10:])


class CannedServer:
    """A loopback server that answers each request with the next of `answers`, closing
    the connection after each whose `close` is set (as a server's keep-alive timeout
    would); it counts the connections it took."""

    def __init__(self, answers: list[tuple[bytes, bool]]) -> None:
        self.answers = answers
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _request(conn: socket.socket) -> bytes:
        """A request's bytes, or b"" if the client closed the connection."""
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < int(
            re.search(rb"Content-Length: (\d+)", got)[1]  # type: ignore[index]
        ):
            if not (piece := conn.recv(65536)):
                return b""
            got += piece
        return got

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while self.answers:
                conn, _ = self.listener.accept()
                self.connections += 1
                with conn:
                    while self.answers and self._request(conn):
                        answer, close = self.answers.pop(0)
                        conn.sendall(answer)
                        if close:
                            break


def test_the_client_keeps_its_connection_and_opens_another_once_it_is_closed() -> None:
    """Kept alive between requests; a kept connection the server closed meanwhile is
    opened again and the request sent on it, once; a refusal with a Content-Length
    ends its answer without waiting for the connection to close."""
    ok = chunked_answer().replace(b"\r\n\r\n", b"\r\nconnection: keep-alive\r\n\r\n", 1)
    refusal = b'{"error": {"message": "max_tokens: too many"}}'
    refused = b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n%s" % (len(refusal), refusal)
    server = CannedServer([(ok, False), (ok, True), (ok, False), (refused, False), (ok, False)])
    client = Client(server.url)
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "春天 🌸"}]}
        for _ in range(3):
            assert client.send_one(body).first_token > 0
        assert server.connections == 2  # the second request's connection closed after it
        with pytest.raises(ServedError, match="answered 400"):
            client.send_one(body)
        client.send_one(body)  # (on a new connection: the client closed the refused one)
        assert server.connections == 3
    finally:
        client.close()
        server.listener.close()
