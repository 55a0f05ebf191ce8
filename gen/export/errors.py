"""What an export raises: one message a user can act on (a missing PDF engine names what to
install), never a traceback."""

from __future__ import annotations

from gen.errors import GenError


class ExportError(GenError):
    """A document could not be exported. Exit code 2 for bad input (an unknown format, a
    folder without document.md), 1 when the export itself failed."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
