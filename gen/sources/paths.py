"""Which files a pipeline's `sources:` names: files, folders and globs relative to the
pipeline's folder (`base`), none of them outside it once links and `..` are resolved. Looks
at the folder tree and each file's size, never at a file's content."""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gen.errors import SourceError
from gen.sources.document import KINDS
from gen.sources.limits import MAX_FILE_BYTES, MAX_FILES

GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Source:
    path: Path  # resolved, inside base
    name: str  # as the pipeline's folder sees it: relative to base, with / between parts
    kind: str  # a value of KINDS


@dataclass(frozen=True, slots=True)
class Found:
    sources: tuple[Source, ...]  # in the order named; a folder's or glob's files sorted
    skipped: tuple[str, ...]  # names of files in a folder or glob of a kind gen does not read


def resolve(specs: Sequence[str], base: Path) -> Found:
    """The files `specs` name, each once, in a fixed order. A spec is a file, a folder (its
    files at any depth, hidden files and folders left out, links to folders not followed) or
    a glob (`**` for any depth). An absolute path is accepted when it lies inside base.
    A file named on its own must be of a kind gen reads; in a folder or a glob, files of
    other kinds are skipped and listed in `skipped`."""
    base = base.resolve()
    found: dict[Path, Source] = {}
    skipped: list[str] = []
    for spec in specs:
        for path, explicit in _expand(spec, base):
            source = _check(path, base, explicit)
            if source is None:
                skipped.append(_name(path, base))
            elif source.path not in found:
                found[source.path] = source
                if len(found) > MAX_FILES:
                    raise SourceError(spec, f"the sources come to more than {MAX_FILES} files")
    return Found(tuple(found.values()), tuple(dict.fromkeys(skipped)))


def _expand(spec: str, base: Path) -> Iterator[tuple[Path, bool]]:
    """(path, named on its own) for each file the spec names, not yet checked."""
    if not spec.strip():
        raise SourceError(repr(spec), "an empty path")
    pattern = spec
    if Path(spec).is_absolute():
        resolved = Path(spec).resolve()
        if not _inside(resolved, base):
            raise SourceError(spec, f"leads outside the pipeline's folder {base}")
        pattern = os.path.relpath(resolved, base)
    if GLOB_CHARS & set(spec):
        matches = sorted(glob.glob(pattern, root_dir=base, recursive=True))
        if not matches:
            raise SourceError(spec, "matches no file")
        for match in matches:
            path = base / match
            _refuse_escape(path, base, spec)
            yield from _walk(path, base) if path.is_dir() else [(path, False)]
        return
    path = base / pattern
    _refuse_escape(path, base, spec)
    if path.is_dir():
        yield from _walk(path, base)
    elif path.exists():
        yield path, True
    else:
        raise SourceError(spec, "no such file or folder")


def _walk(folder: Path, base: Path) -> Iterator[tuple[Path, bool]]:
    """Every file under folder, sorted by path, hidden ones left out."""
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        files += [Path(root) / n for n in names if not n.startswith(".")]
    for path in sorted(files, key=lambda p: _name(p, base)):
        yield path, False


def _check(path: Path, base: Path, explicit: bool) -> Source | None:
    """The file as a Source; None for a file of another kind found in a folder or glob."""
    name = _name(path, base)
    _refuse_escape(path, base, name)
    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        if not explicit:
            return None
        kinds = ", ".join(KINDS)
        raise SourceError(name, f"not a kind of file gen reads (it reads {kinds})")
    try:
        info = path.stat()
    except OSError as exc:
        raise SourceError(name, f"cannot read it: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SourceError(name, "not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise SourceError(
            name, f"{_mb(info.st_size)} is more than a source may be ({_mb(MAX_FILE_BYTES)})"
        )
    return Source(path.resolve(), name, kind)


def _refuse_escape(path: Path, base: Path, shown: str) -> None:
    resolved = path.resolve()
    if not _inside(resolved, base):
        raise SourceError(shown, f"leads outside the pipeline's folder {base} (to {resolved})")


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def _name(path: Path, base: Path) -> str:
    """path relative to base as named (a link keeps its own name), else as resolved."""
    named = os.path.relpath(os.path.normpath(path), base)
    if named.startswith(".."):
        named = os.path.relpath(path.resolve(), base)
    return Path(named).as_posix()


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.0f} MB"
