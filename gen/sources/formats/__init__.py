"""One reader per kind of file: `blocks(data: bytes) -> list[Block]`, raising Unreadable."""
