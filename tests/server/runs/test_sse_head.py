"""A HEAD request on an event stream gets the headers and an empty body at once (it must
not stream for ever); a GET on the same route streams."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.testclient import TestClient

from gen.server.sse import EventStream, data


def test_head_on_an_event_stream_ends_at_once() -> None:
    async def events() -> AsyncIterator[bytes]:
        while True:
            yield data("春天 🌸")

    async def route(request: Request) -> EventStream:
        return EventStream(events())

    with TestClient(Starlette(routes=[Route("/e", route, methods=["GET"])])) as client:
        head = client.head("/e")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == "text/event-stream; charset=utf-8"
        with client.stream("GET", "/e") as got:
            first = next(got.iter_lines())
        assert first == "data: 春天 🌸"
