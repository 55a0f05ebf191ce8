"""How `gen run` is stopped from outside: SIGTERM, and the reader of stdout going away
(`| head`), cancel the run as Ctrl-C does (asyncio.run turns SIGINT into a cancellation),
so finished sections are kept and the manifest says cancelled."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from gen.cli.common import stdout_closed

T = TypeVar("T")

if TYPE_CHECKING:
    from gen.pipeline.run.events import Event, Subscriber


class Stopped(Exception):
    """The run was cancelled from outside: `how` for the message, `code` for the exit."""

    def __init__(self, how: str, code: int) -> None:
        super().__init__(how)
        self.how = how
        self.code = code


class Canceller:
    def __init__(self) -> None:
        self.task: asyncio.Future[Any] | None = None
        self.stop: Stopped | None = None

    def cancel(self, how: str, code: int) -> None:
        self.stop = self.stop or Stopped(how, code)
        if self.task is not None:
            self.task.cancel()

    def guard(self, write: Subscriber) -> Subscriber:
        """`write`, a subscriber that writes to stdout, with a closed pipe cancelling the
        run rather than failing the section whose event it was."""

        def guarded(event: Event) -> None:
            try:
                write(event)
            except BrokenPipeError:
                self.cancel("stdout closed", stdout_closed())

        return guarded

    async def run(self, work: Awaitable[T]) -> T:
        """Await the run; raises Stopped when SIGTERM or a guarded subscriber cancelled it."""
        self.task = asyncio.ensure_future(work)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.cancel, "terminated", 128 + signal.SIGTERM)
        try:
            return await self.task
        except asyncio.CancelledError:
            if self.stop is not None:
                raise self.stop from None
            raise
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
