"""The server's guards, as ASGI middleware: a bearer key on every /v1/* request, and a limit
on the size of a request body (413 past it). Loopback binding is the CLI's check."""

from __future__ import annotations

import ipaddress
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gen.server.errors import APIError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


COOKIE = "gen_api_key"


class BearerAuth:
    """Every /v1/* request needs `Authorization: Bearer <key>` (401 otherwise). A GET may
    carry the key as the cookie `gen_api_key` instead: a browser's EventSource, <img> and
    download links cannot send a header. (A cookie never authorises a POST, so no other
    site can start or cancel a run through a visitor's browser.)"""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.key = api_key.encode()
        self.expected = b"Bearer " + self.key

    def _allowed(self, scope: Scope) -> bool:
        headers = dict(scope["headers"])
        if secrets.compare_digest(headers.get(b"authorization", b""), self.expected):
            return True
        if scope["method"] not in ("GET", "HEAD") or b"cookie" not in headers:
            return False
        jar = SimpleCookie()
        try:
            jar.load(headers[b"cookie"].decode("latin-1"))
        except CookieError:
            return False
        given = jar.get(COOKIE)
        return given is not None and secrets.compare_digest(unquote(given.value).encode(), self.key)

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
    (a body read past the limit raises the 413 in whoever reads it)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _error(self) -> APIError:
        return APIError(
            413, f"the request body is larger than {self.limit} bytes", code="body_too_large"
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

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise self._error()
            return message

        await self.app(scope, counted, send)
