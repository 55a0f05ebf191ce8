"""The servers behind an `openai:` model: each request goes to the replica with the fewest
requests outstanding, at most `concurrency` per replica; a replica that failed is skipped
for a while. How long to wait before trying again (backoff with jitter, Retry-After)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

COOL_DOWN_SECONDS = 30.0  # a replica that failed is skipped this long
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0


@dataclass(eq=False)
class Replica:
    url: str
    client: httpx.AsyncClient
    places: asyncio.Semaphore
    outstanding: int = 0
    down_until: float = 0.0
    failures: int = 0
    requests: int = 0  # sent to it, in all (the manifest and tests read it)


@dataclass(eq=False)
class Replicas:
    replicas: list[Replica] = field(default_factory=list)

    @classmethod
    def open(
        cls, urls: list[str], headers: dict[str, str], timeout: float, concurrency: int
    ) -> Replicas:
        limits = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        return cls(
            [
                Replica(
                    url.rstrip("/"),
                    httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=limits),
                    asyncio.Semaphore(concurrency),
                )
                for url in urls
            ]
        )

    def pick(self) -> Replica:
        """The replica to send to: up ones first, then the fewest outstanding requests."""
        now = time.monotonic()
        up = [r for r in self.replicas if r.down_until <= now]
        pool = up or sorted(self.replicas, key=lambda r: r.down_until)[:1]
        return min(pool, key=lambda r: (r.outstanding, r.failures))

    @asynccontextmanager
    async def use(self) -> AsyncIterator[Replica]:
        replica = self.pick()
        replica.outstanding += 1  # counted while it waits for a place, too
        try:
            async with replica.places:
                replica.requests += 1
                yield replica
        finally:
            replica.outstanding -= 1

    @staticmethod
    def failed(replica: Replica) -> None:
        replica.failures += 1
        replica.down_until = time.monotonic() + COOL_DOWN_SECONDS

    @staticmethod
    def worked(replica: Replica) -> None:
        replica.failures = 0
        replica.down_until = 0.0

    async def aclose(self) -> None:
        await asyncio.gather(*(r.client.aclose() for r in self.replicas))


def backoff(attempt: int, retry_after: str | None = None) -> float:
    """Seconds before try `attempt` (1 = the first retry): the server's Retry-After when it
    gave one, else exponential backoff with full jitter."""
    if retry_after:
        seconds = _retry_after_seconds(retry_after)
        if seconds is not None:
            return min(seconds, RETRY_AFTER_CAP)
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


def _retry_after_seconds(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
