"""The server's settings, no sockets: what `gen serve` binds, admits and runs (ServerConfig,
with the runs' RunLimits), checked when built and built once where the server starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.server.security import is_loopback

LOOPBACK = "127.0.0.1"


class SettingError(ValueError):
    """A setting out of its range. `name` is the setting's field, so that an edge can name
    it its own way (`gen serve` names its option): `{name} {rule}, got {value}`."""

    def __init__(self, name: str, rule: str, value: object) -> None:
        super().__init__(f"{name} {rule}, got {value}")
        self.name = name
        self.rule = rule


def _positive(name: str, value: float) -> None:
    if not value > 0:  # (nan fails every comparison)
        raise SettingError(name, "must be positive", value)


@dataclass(frozen=True, slots=True)
class RunLimits:
    """How many pipeline runs a server takes: max_runs generate at once, max_waiting wait
    for a place (past it a 429), max_watchers event streams (SSE) are open at once (past it
    a 429)."""

    max_runs: int = 2
    max_waiting: int = 16
    max_watchers: int = 256

    def __post_init__(self) -> None:
        for name in ("max_runs", "max_waiting", "max_watchers"):
            _positive(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How `gen serve` serves. Built once at the edge (`from_env`), then passed down:
    nothing below reads the environment.

    host and port: where it listens; bound to another address than loopback it needs an
    api_key (every /v1/* request then carries it). loopback_only: answer loopback host
    names only (a DNS-rebinding guard, on where the bind is loopback). cors_origins:
    browser origins allowed in. max_queue: completion requests admitted and unanswered
    (past it a 429, before the body is read). A body past max_body_bytes is a 413; one
    that stalls body_timeout seconds before its end a 408. Runs are written in out, may
    name the pipelines in pipelines, and are limited by runs; their event streams send a
    keep-alive comment every sse_ping seconds. fault_marker: a test hook (see
    generation.FaultyStream)."""

    host: str = LOOPBACK
    port: int = 8000
    api_key: str | None = None
    loopback_only: bool = False
    cors_origins: tuple[str, ...] = ()
    max_queue: int = 256
    max_body_bytes: int = 8 * 2**20
    body_timeout: float = 30.0
    out: Path = Path("outputs")
    pipelines: Path = Path("pipelines")
    runs: RunLimits = field(default_factory=RunLimits)
    sse_ping: float = 15.0
    fault_marker: str | None = None

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.api_key:
            raise ValueError(
                f"refusing to serve on {self.host} without an API key: anyone who can reach "
                f"it could use the model. Pass --api-key KEY (or set GEN_API_KEY), or bind "
                f"127.0.0.1"
            )
        if not 0 <= self.port <= 65535:
            raise SettingError("port", "must be in 0..65535", self.port)
        for name in ("max_queue", "max_body_bytes", "body_timeout", "sse_ping"):
            _positive(name, getattr(self, name))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: Any) -> ServerConfig:
        """The settings `given` (None: not given), else the environment's: GEN_API_KEY (the
        key, also where one is given empty), GEN_SERVE_FAULT (the test hook). loopback_only
        follows the host unless given."""
        env = os.environ if env is None else env
        values = {k: v for k, v in given.items() if v is not None}
        values["api_key"] = values.get("api_key") or env.get("GEN_API_KEY") or None
        values.setdefault("fault_marker", env.get("GEN_SERVE_FAULT") or None)
        values.setdefault("loopback_only", is_loopback(values.get("host", LOOPBACK)))
        return cls(**values)
