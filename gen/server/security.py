"""The server's guards, as ASGI middleware: a bearer key on every /v1/* request, and a limit
on the size of a request body (413 past it). Loopback binding is the CLI's check."""

from __future__ import annotations

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


class BearerAuth:
    """Every /v1/* request needs `Authorization: Bearer <key>` (401 otherwise)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
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
