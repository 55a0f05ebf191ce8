"""A run's watchers share one feed: its events.jsonl read once for all of them, and only
when its writer has written more, each event framed once; every watcher still gets every
event after its Last-Event-ID, once and in order, and the feed goes with its last watcher."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gen.pipeline.run.events import EventLog, read_events
from gen.pipeline.run.rundir import RunDir
from gen.server.config import RunLimits
from gen.server.runs.events import Feed, follow
from gen.server.runs.manager import Notifier, RunManager
from gen.server.sse import named
from tests.pipeline.fake_backend import FakeBackend

TEXTS = ["春天 🌸", "龙的故事 🐉", "สวัสดี", "naïve café"]


def framed(path: Path) -> list[bytes]:
    return [named(e, e["type"], str(e["seq"])) for e in read_events(path)]


def test_watchers_share_one_reading_and_each_gets_every_event_after_its_own_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog("run-1", path)
    notifier = Notifier()
    log.subscribe(notifier.notify)
    feed = Feed(path)
    reads = 0
    read = feed.reader.new

    def counted() -> object:
        nonlocal reads
        reads += 1
        return read()

    feed.reader.new = counted  # type: ignore[method-assign]
    running = True

    async def wait() -> None:
        await notifier.wait(1.0)

    async def watch(after: int) -> list[bytes]:
        frames = follow(feed, after, lambda: running, wait, lambda: notifier.count)
        return [frame async for frame in frames]

    async def write() -> None:
        nonlocal running
        log.emit("run_started")
        for text in TEXTS:
            await asyncio.sleep(0.01)
            log.emit("delta", section="a", text=text)
        await asyncio.sleep(0.01)
        log.emit("run_finished")
        running = False
        notifier.notify()

    async def go() -> list[list[bytes]]:
        log.emit("queued")  # on disk before anyone watches
        watchers = [asyncio.ensure_future(watch(after)) for after in (0, 0, 0, 2)]
        await asyncio.sleep(0.01)
        await write()
        return list(await asyncio.gather(*watchers))

    got = asyncio.run(go())
    log.close()
    every = framed(path)
    assert len(every) == 7 and feed.frames == every
    assert got == [every, every, every, every[2:]]
    # read when the first watcher came, each time the writer's count moved (seven), and
    # a last look by each watcher once the run was over: not each watcher on each event
    assert reads <= 1 + 7 + 4


def test_the_feed_reads_a_file_this_server_writes_only_once_its_count_moves(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog("run-2", path)
    log.emit("run_started")
    feed = Feed(path)
    feed.update(1)
    assert len(feed.frames) == 1
    log.emit("delta", section="a", text="茶")
    feed.update(1)  # the writer has not said it wrote more
    assert len(feed.frames) == 1
    feed.update(2)
    feed.update(None)  # another process's file: read whatever
    log.emit("run_finished")
    feed.update(None)
    log.close()
    assert feed.frames == framed(path) and feed.seqs == [1, 2, 3]


def test_a_runs_watchers_hold_one_feed_until_the_last_lets_go(tmp_path: Path) -> None:
    runs = RunManager(FakeBackend(), tmp_path, tmp_path, RunLimits(max_watchers=4))
    one, other = RunDir.create(tmp_path, "tiny"), RunDir.create(tmp_path, "tiny")
    first, leave_first = runs.feed(one)
    second, leave_second = runs.feed(one)
    third, leave_third = runs.feed(other)
    assert first is second and first is not third
    assert runs.feeds == {one.run_id: first, other.run_id: third}
    leave_first()
    leave_first()  # (a release may come twice: the stream's end and its collection)
    assert runs.feeds[one.run_id] is first and first.watchers == 1
    leave_second()
    leave_third()
    assert runs.feeds == {}
