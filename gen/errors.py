"""One exception tree for gen; the CLI and the server translate it at the edges."""

from __future__ import annotations


class GenError(Exception):
    """Base class of every error gen raises on purpose."""

    exit_code = 1


class ConfigError(GenError):
    """Bad user input, located in a file: `FILE:LINE:COL: message` plus a snippet."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        snippet: str | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.snippet = snippet
        self.notes = notes  # lines shown after the snippet, e.g. the file's other errors

    @property
    def location(self) -> str:
        parts = [p for p in (self.file, self.line, self.col) if p is not None]
        return ":".join(str(p) for p in parts)

    def __str__(self) -> str:
        head = f"{self.location}: {self.message}" if self.location else self.message
        return "\n".join([head, *([self.snippet] if self.snippet else []), *self.notes])


class SourceError(ConfigError):
    """A source document cannot be used: `FILE: message` (or `FILE:LINE: message`), where FILE
    is the path as the pipeline names it, e.g. `notes/q3.pdf: not a PDF (no %PDF header)`."""

    def __init__(self, file: str, message: str, line: int | None = None) -> None:
        super().__init__(message, file=file, line=line)


class TemplateError(ConfigError):
    """A Jinja2 template failed to parse or render (sandbox violations included)."""


class SandboxError(TemplateError):
    """A template broke the sandbox while it rendered: an escape, or a cost limit (steps,
    time, size, call depth, range()). Whatever values it gets, such a template is refused."""


class ModelError(GenError):
    """A model spec cannot be resolved, converted or loaded."""

    exit_code = 2


class ContextOverflowError(GenError):
    """A prompt cannot fit the context window, even after trimming."""

    def __init__(self, message: str, *, prompt_tokens: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.limit = limit


class BackendError(GenError):
    """A backend (the local engine or a remote server) failed to generate."""
