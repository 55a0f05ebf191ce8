"""The server's guards, as ASGI middleware: a bearer key on every /v1/* request, and limits
on a request body's size (413 past it) and on its stalls (408). That a public bind has a
key is the config's check."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gen.server.errors import APIError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


SESSION_COOKIE = "gen_session"


def session_token(api_key: str) -> str:
    """What the dashboard's session cookie holds: derived from the key, never the key."""
    return hmac.new(api_key.encode(), b"gen dashboard session", hashlib.sha256).hexdigest()


def cookies(header: bytes) -> dict[str, str]:
    """A Cookie header's pairs, read leniently: another site's odd cookie on the same host
    (ports share cookies) must not hide ours, as it would from http.cookies."""
    jar: dict[str, str] = {}
    for part in header.decode("latin-1").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name not in jar:
            jar[name] = value.strip().strip('"')
    return jar


class BearerAuth:
    """Every /v1/* request needs `Authorization: Bearer <key>` (401 otherwise). A GET may
    carry the session cookie instead, which POST /v1/session sets (HttpOnly, SameSite
    Strict, a token derived from the key): a browser's EventSource, <img> and download
    links cannot send a header. A cookie never authorises a POST, so no other site can
    start or cancel a run through a visitor's browser."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()
        self.session = session_token(api_key).encode()

    def _allowed(self, scope: Scope) -> bool:
        headers = dict(scope["headers"])
        if secrets.compare_digest(headers.get(b"authorization", b""), self.expected):
            return True
        if scope["method"] not in ("GET", "HEAD") or b"cookie" not in headers:
            return False
        given = cookies(headers[b"cookie"]).get(SESSION_COOKIE, "")
        return secrets.compare_digest(given.encode("latin-1"), self.session)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        v1 = scope["type"] == "http" and scope["path"].startswith("/v1/")
        if v1 and not self._allowed(scope):
            error = APIError(
                401,
                "a valid API key is needed: send the header Authorization: Bearer <key>",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """A request body past `limit` bytes is answered 413, whether it says its length or not
    (a body read past the limit raises the 413 in whoever reads it); one that stalls for
    `timeout` seconds before its end is answered 408, so that a client which never sends
    its body holds no place in the queue for long."""

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    def _error(self) -> APIError:
        return APIError(
            413,
            f"the request body is larger than the limit of {self.limit} bytes "
            f"({self.limit / 2**20:g} MB; gen serve --max-body-mb)",
            code="body_too_large",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await self._error().response()(scope, receive, send)
            return
        seen = 0
        done = False  # the body has ended: later receives wait for a disconnect, untimed

        async def counted() -> Message:
            nonlocal seen, done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.timeout)
            except TimeoutError:
                raise APIError(
                    408,
                    f"the request body stalled: nothing came for {self.timeout:g} s "
                    f"(gen serve --body-timeout)",
                    code="body_timeout",
                ) from None
            done = message["type"] != "http.request" or not message.get("more_body", False)
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise self._error()
            return message

        await self.app(scope, counted, send)


class LoopbackHosts:
    """On a loopback address, only requests that name a loopback host: a page on another
    site whose name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if not is_loopback(name.strip("[]")) and not name.endswith(".localhost"):
                error = APIError(400, f"the Host header {host!r} is not this server's name")
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
