"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with the right
status, from gen's exception tree and pydantic's validation errors (body.py: bad JSON)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from gen.errors import BackendError, ContextOverflowError, GenError
from gen.sampling import InvalidParam

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "internal_server_error",
    503: "service_unavailable_error",
}


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        kind: str | None = None,
    ) -> None:
        """`kind`: the error's type where OpenAI's differs from its status's usual one."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}
        self.kind = kind or _TYPES.get(status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def busy(message: str, code: str, retry_after: int) -> APIError:
    """A 429: a limit is reached for now; the client may retry after `retry_after` seconds."""
    return APIError(429, message, code=code, headers={"Retry-After": str(retry_after)})


def from_validation(exc: ValidationError) -> APIError:
    """The first problem of a request body, naming its parameter (`messages.0.role`); of a
    union's alternatives, the one that got furthest into the value."""
    errors = exc.errors(include_url=False)
    field = errors[0]["loc"][:1]
    first = max((e for e in errors if e["loc"][:1] == field), key=lambda e: len(e["loc"]))
    loc = [str(p) for p in first["loc"] if not _is_type_tag(p)]
    param = ".".join(loc) or None
    where = f"{param}: " if param else ""
    note = _NOTES.get(param or "", "")
    message = first["msg"].removeprefix("Value error, ")  # a validator's own ValueError
    return APIError(400, f"{where}{message}{note}", param=param, code="invalid_value")


_NOTES = {
    "n": " (gen serve answers with one choice)",
}


def _is_type_tag(part: Any) -> bool:
    """pydantic names the union member it tried (`str`, `list[TextPart]`) in an error's loc."""
    return isinstance(part, str) and (part in ("str", "int") or "[" in part or "-" in part)


def from_exception(exc: Exception) -> APIError:
    """gen's own errors as the server reports them; anything else is an internal error."""
    if isinstance(exc, InvalidParam):
        return APIError(400, str(exc), param=exc.param, code="invalid_value")
    if isinstance(exc, ContextOverflowError):
        return APIError(400, str(exc), param="messages", code="context_length_exceeded")
    if isinstance(exc, BackendError):
        return APIError(500, str(exc), code="generation_failed")
    if isinstance(exc, GenError):
        return APIError(400 if exc.exit_code == 2 else 500, str(exc))
    return APIError(500, f"internal error: {type(exc).__name__}", code="internal_error")
