"""A run's events over Server-Sent Events (docs/design.md §5): the replay from events.jsonl
after the client's Last-Event-ID, then the live events as they are written, by this server
or by a `gen run` in the same outputs folder; the stream ends once the run is over.

A run's watchers share one Feed: its file read once and each event framed once, however
many dashboards follow it (each watcher had its own reader: with N of them, every delta
was read from the file and encoded N times on the event loop the streams share)."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from gen.pipeline.run.events import EventReader
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


class Feed:
    """One run's events.jsonl as SSE frames, read and framed once for all its watchers:
    `seqs[i]` is the seq of `frames[i]`, in the file's order."""

    def __init__(self, path: Path) -> None:
        self.reader = EventReader(path)
        self.seqs: list[int] = []
        self.frames: list[bytes] = []
        self.watchers = 0
        self._read_at: int | None = None  # the writer's count of events when last read

    def update(self, written: int | None = None) -> None:
        """Take what has been appended since the last read. `written`: the writer's
        count of events so far, where this server writes the run (nothing new to read
        unless it moved); None reads the file whatever (another process writes it)."""
        if written is not None:
            if written == self._read_at:
                return
            self._read_at = written
        for event in self.reader.new():
            self.seqs.append(event["seq"])
            self.frames.append(named(event, str(event.get("type", "message")), str(event["seq"])))


async def follow(
    feed: Feed,
    after: int,
    active: Callable[[], bool],
    wait: Callable[[], Awaitable[None]],
    written: Callable[[], int | None] = lambda: None,
) -> AsyncIterator[bytes]:
    """The frame of every event with seq > `after`, once and in order: those on disk,
    then new ones as they are appended, until the run is no longer active and nothing
    more is written. `written()`: as Feed.update takes it."""
    at = 0  # the next of the feed's frames to look at
    while True:
        feed.update(written())
        fresh = at < len(feed.frames)
        if not fresh and not active():
            feed.update()  # written meanwhile
            if at == len(feed.frames):
                return
        elif not fresh:
            await wait()
            continue
        while at < len(feed.frames):
            seq, frame = feed.seqs[at], feed.frames[at]
            at += 1
            if seq > after:
                after = seq
                yield frame


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


async def sse(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield retry(RETRY_MS, "gen run events")
    async for frame in frames:
        yield frame
