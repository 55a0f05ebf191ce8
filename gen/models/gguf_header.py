"""A GGUF file's header, read without its weights: the metadata (the context length) and
where its tensor data must end, so a truncated file is refused before any conversion.

Knows the GGUF v2/v3 layout only; the sizes of quantised blocks come from the gguf package.
"""

from __future__ import annotations

import functools
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.errors import ModelError

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_MAX_DIMS = 8
_ALIGNMENT = 32  # when general.alignment is not set


class _Malformed(Exception):
    """The bytes end early or do not follow the GGUF layout."""


class _UnknownType(Exception):
    """A tensor of a ggml type the gguf package does not know: its size is unknown."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One entry of the tensor table: its GGUF shape (innermost dimension first), ggml
    type number, and where its bytes are in the file."""

    name: str
    shape: tuple[int, ...]
    kind: int
    start: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """The scalar and string metadata (arrays such as the vocabulary are skipped), the
    tensor table, and the byte offset where the last tensor's data ends."""

    metadata: dict[str, Any]
    data_end: int
    tensors: tuple[TensorInfo, ...] = ()

    @property
    def context_length(self) -> int | None:
        arch = self.metadata.get("general.architecture")
        value = self.metadata.get(f"{arch}.context_length")
        return value if isinstance(value, int) and value > 0 else None


def read_header(path: Path) -> GGUFHeader:
    """The header of the GGUF file at `path`; ModelError naming the file when it is cut
    short or is not a GGUF file at all. Kept per file version: `gen run` reads it before
    the model loads and the store again before converting."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return _read_header(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_header(path: Path, size: int, mtime_ns: int) -> GGUFHeader:
    try:
        with path.open("rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        header = _parse(_Reader(data, size))
    except _Malformed as exc:
        raise ModelError(f"{path}: truncated or not a GGUF file ({exc})") from None
    except _UnknownType as exc:
        raise ModelError(
            f"{path}: gen cannot read this file: {exc}, which the gguf package does not know "
            "(a newer llama.cpp's type?)"
        ) from None
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
    if header.data_end > size:
        raise ModelError(
            f"{path}: truncated or not a GGUF file (its tensors need {header.data_end:,} "
            f"bytes, the file has {size:,})"
        )
    return header


class _Reader:
    """Little-endian reads over the mapped file that fail as _Malformed instead of
    returning short data; the vocabulary's strings are stepped over, not copied."""

    def __init__(self, data: mmap.mmap | bytes, size: int) -> None:
        self.data = data
        self.size = size
        self.pos = 0

    def _advance(self, n: int) -> int:
        start = self.pos
        if n > self.size - start:
            raise _Malformed(f"the file ends before byte {start + n:,}")
        self.pos = start + n
        return start

    def take(self, n: int) -> bytes:
        start = self._advance(n)
        return self.data[start : start + n]

    def skip(self, n: int) -> None:
        self._advance(n)

    def scalar(self, fmt: str) -> Any:
        return struct.unpack_from(fmt, self.data, self._advance(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.scalar("<Q")).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        """One metadata value; an array is skipped over and read as None."""
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise _Malformed(f"unknown metadata type {kind}")
        item, count = self.scalar("<I"), self.scalar("<Q")
        if item in _SCALARS:
            self.skip(count * struct.calcsize(_SCALARS[item]))
        elif item == _STRING:
            self._skip_strings(count)
        else:
            raise _Malformed(f"unknown array item type {item}")
        return None

    def _skip_strings(self, count: int) -> None:
        """Step over `count` length-prefixed strings (a vocabulary: 262,144 of them in
        Gemma 3's), without building them."""
        data, size, pos, length = self.data, self.size, self.pos, struct.Struct("<Q")
        for _ in range(count):
            if pos + 8 > size:
                raise _Malformed(f"the file ends before byte {pos + 8:,}")
            pos += 8 + length.unpack_from(data, pos)[0]
        if pos > size:
            raise _Malformed(f"the file ends before byte {pos:,}")
        self.pos = pos


def _parse(r: _Reader) -> GGUFHeader:
    # 1) magic, version and counts
    if r.take(4) != _MAGIC:
        raise _Malformed("no GGUF magic number at the start")
    version = r.scalar("<I")
    if version not in _VERSIONS:
        raise _Malformed(f"GGUF version {version}; readable are {_VERSIONS}")
    n_tensors, n_metadata = r.scalar("<Q"), r.scalar("<Q")
    # 2) metadata
    metadata: dict[str, Any] = {}
    for _ in range(n_metadata):
        key = r.string()
        metadata[key] = r.value(r.scalar("<I"))
    # 3) tensor table: name, shape, type, offset into the data section
    end = 0
    table: list[tuple[str, tuple[int, ...], int, int, int]] = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.scalar("<I")
        if n_dims > _MAX_DIMS:
            raise _Malformed(f"a tensor with {n_dims} dimensions")
        shape = tuple(r.scalar("<Q") for _ in range(n_dims))
        elements = 1
        for n in shape:
            elements *= n
        kind, offset = r.scalar("<I"), r.scalar("<Q")
        try:
            nbytes = _tensor_bytes(kind, elements)
        except _UnknownType:
            raise _UnknownType(f"the tensor {name!r} has ggml type {kind}") from None
        table.append((name, shape, kind, offset, nbytes))
        end = max(end, offset + nbytes)
    alignment = metadata.get("general.alignment") or _ALIGNMENT
    start = -(-r.pos // alignment) * alignment
    tensors = tuple(TensorInfo(n, shape, k, start + o, b) for n, shape, k, o, b in table)
    return GGUFHeader(metadata, start + end, tensors)


def _tensor_bytes(kind: int, elements: int) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (KeyError, ValueError):
        raise _UnknownType(kind) from None
    return elements // block * size
