"""A run's events over Server-Sent Events (docs/design.md §5): the replay from events.jsonl
after the client's Last-Event-ID, then the live events as they are written, by this server
or by a `gen run` in the same outputs folder; the stream ends once the run is over."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from gen.pipeline.run.events import Event, EventReader
from gen.server.errors import APIError
from gen.server.sse import named, retry

T = TypeVar("T")
RETRY_MS = 1000  # how soon an EventSource reconnects after a dropped stream


def last_event_id(header: str | None, query: str | None) -> int:
    """Where a watcher resumes: the Last-Event-ID header (an EventSource reconnecting), else
    the `last_event_id` query (a new EventSource picking up), else from the start."""
    raw = header if header is not None else query
    if raw is None or raw.strip() == "":
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        raise APIError(
            400, f"Last-Event-ID must be an event's seq (an integer), got {raw!r}"
        ) from None
    if value < 0:
        raise APIError(400, f"Last-Event-ID must be 0 or more, got {value}")
    return value


async def follow(
    reader: EventReader,
    after: int,
    active: Callable[[], bool],
    wait: Callable[[], Awaitable[None]],
) -> AsyncIterator[Event]:
    """Every event with seq > `after`, once and in order: those on disk, then new ones as
    they are appended, until the run is no longer active and nothing more is written."""
    while True:
        fresh = [e for e in reader.new() if e["seq"] > after]
        if not fresh:
            if not active():
                fresh = [e for e in reader.new() if e["seq"] > after]  # written meanwhile
                if not fresh:
                    return
            else:
                await wait()
                continue
        for event in fresh:
            after = event["seq"]
            yield event


def held(items: AsyncIterator[T], release: Callable[[], None]) -> AsyncIterator[T]:
    """`items`, then `release()` once the stream ends, fails or is closed (the client left),
    or is dropped without ever being started."""
    stream = _released_after(items, release)
    weakref.finalize(stream, release)
    return stream


async def _released_after(items: AsyncIterator[T], release: Callable[[], None]) -> AsyncIterator[T]:
    try:
        async for item in items:
            yield item
    finally:
        release()


async def sse(events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    yield retry(RETRY_MS, "gen run events")
    async for item in events:
        yield named(item, str(item.get("type", "message")), str(item["seq"]))
