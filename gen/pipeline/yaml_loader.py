"""YAML with positions: plain JSON-like data (mappings, lists, strings, finite numbers, booleans,
null) plus a SourceMap of every key and value (1-based).

Knows YAML syntax, duplicate keys, characters YAML refuses, alias bombs, nesting depth and
locations; nothing about pipelines.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gen.errors import ConfigError
from gen.pipeline.snippet import located_error, position

YamlPath = tuple[Any, ...]  # mapping keys and sequence indices from the root
MAX_VALUES = 100_000  # what a document may expand to through aliases and merges
MAX_DEPTH = 100  # lists and mappings nested in each other, aliases included
MAX_CHARS = 4 * 2**20  # PyYAML reads about a megabyte a second
_TAG = "tag:yaml.org,2002:"
_MAP_TAG = _TAG + "map"
_SEQ_TAG = _TAG + "seq"
_MERGE_TAG = _TAG + "merge"
_SCALAR_TAGS = frozenset(_TAG + name for name in ("null", "bool", "int", "float", "str"))
_TIMESTAMP_TAG = _TAG + "timestamp"  # kept as the text written: JSON has no dates


@dataclass(frozen=True, slots=True)
class Span:
    """Where a node sits in the file; `style` is the scalar style ('|', '>', '"', "'", None)."""

    line: int
    col: int
    end_line: int
    end_col: int
    style: str | None = None

    @classmethod
    def of(cls, node: Node) -> Span:
        start, end = node.start_mark, node.end_mark
        style = node.style if isinstance(node, ScalarNode) else None
        return cls(start.line + 1, start.column + 1, end.line + 1, end.column + 1, style)

    @property
    def width(self) -> int:
        return self.end_col - self.col if self.end_line == self.line else 1


def format_path(path: YamlPath) -> str:
    """('sections', 2, 'max_tokens') -> 'sections[2].max_tokens'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(slots=True)
class SourceMap:
    """Positions of a loaded YAML document; `values[path]` and `keys[path]` are Spans."""

    file: str
    text: str
    values: dict[YamlPath, Span] = field(default_factory=dict)
    keys: dict[YamlPath, Span] = field(default_factory=dict)
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.text.splitlines()

    def value_span(self, path: YamlPath) -> Span:
        """The span of the value at `path`, else of its nearest located ancestor."""
        for n in range(len(path), -1, -1):
            span = self.values.get(tuple(path[:n]))
            if span is not None:
                return span
        return Span(1, 1, 1, 1)

    def key_span(self, path: YamlPath) -> Span:
        return self.keys.get(tuple(path)) or self.value_span(path)

    def error(
        self,
        path: YamlPath,
        message: str,
        *,
        at: Literal["key", "value"] = "value",
    ) -> ConfigError:
        """A located error for the key or value at `path`."""
        span = self.key_span(path) if at == "key" else self.value_span(path)
        return self.error_at(span.line, span.col, message, span.width)

    def error_at(
        self,
        line: int,
        col: int,
        message: str,
        width: int = 1,
    ) -> ConfigError:
        return located_error(message, self.file, self.lines, line, col, width, ConfigError)


def load_yaml(text: str, file: str) -> tuple[Any, SourceMap]:
    """Parse one YAML document into plain data and its SourceMap; errors are ConfigError."""
    smap = SourceMap(file, text)
    if len(text) > MAX_CHARS:
        message = f"longer than {MAX_CHARS // 2**20} MiB, more YAML than gen reads"
        raise smap.error_at(1, 1, f"{message}; give long data as CSV or JSON Lines records")
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # raised for the whole text before parsing
        raise _character_error(exc, smap) from None
    try:
        root = loader.get_single_node()
        data = None
        if root is not None:
            builder = _Builder(loader, smap)
            builder.size(root, 1)  # refuses an alias bomb before anything is built
            data = builder.build(root, ())
    except _TooDeep as exc:
        raise smap.error_at(exc.line, exc.col, _too_deep()) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, smap) from None
    finally:
        loader.dispose()
    return data, smap


class _TooDeep(Exception):
    def __init__(self, mark: yaml.Mark) -> None:
        super().__init__()
        self.line, self.col = mark.line + 1, mark.column + 1


def _too_deep() -> str:
    return f"lists and mappings nested more than {MAX_DEPTH} deep; flatten the value"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # yaml has no type stubs
    """SafeLoader whose composer (which recurses once per level) stops at MAX_DEPTH, long
    before Python's recursion limit: `[[[[...` ten thousand deep is refused, not a crash."""

    depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.depth >= MAX_DEPTH:
            raise _TooDeep(self.peek_event().start_mark)
        self.depth += 1
        try:
            node: Node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        return node


class _Builder:
    """Constructs plain data from composed nodes while recording spans."""

    def __init__(self, loader: yaml.SafeLoader, smap: SourceMap) -> None:
        self.loader = loader
        self.smap = smap
        self.sizes: dict[int, int] = {}  # id(node) -> values it expands to
        self.heights: dict[int, int] = {}  # id(node) -> levels of nesting it holds
        self.active: set[int] = set()

    def size(self, node: Node, depth: int) -> int:
        """The values `node` (at nesting level `depth`) expands to, each alias counted again:
        an alias is the same node once more, so nine levels of nine aliases would build 9**9
        values. Counted per node before anything is built; past MAX_VALUES it fails at the
        innermost node that crosses the limit. Aliases can also nest a value deeper than
        its text does (`b: [*a]`, `c: [*b]`, ...): past MAX_DEPTH levels it fails too."""
        if id(node) in self.sizes:
            if depth + self.heights[id(node)] - 1 > MAX_DEPTH:
                raise self._error(node, _too_deep())
            return self.sizes[id(node)]
        if id(node) in self.active:
            raise self._error(node, "recursive YAML alias")
        if depth > MAX_DEPTH:
            raise self._error(node, _too_deep())
        self.active.add(id(node))
        total, height = 1, 1
        try:
            for child, merged in self._children(node):  # merged: its entries, on this level
                level = 0 if merged else 1
                total += self.size(child, depth + level) - (1 - level)
                height = max(height, level + self.heights[id(child)])
                if total > MAX_VALUES:
                    raise self._error(
                        node,
                        f"aliases (*name) or merges (<<:) expand this value past "
                        f"{MAX_VALUES:,} values; write the values out, or repeat them less",
                    )
        finally:
            self.active.discard(id(node))
        self.sizes[id(node)], self.heights[id(node)] = total, height
        return total

    def _children(self, node: Node) -> Iterator[tuple[Node, bool]]:
        """The nodes `node` holds, each with whether it is merged in (`<<:`): a merge
        brings in a mapping's entries, not the mapping itself."""
        if isinstance(node, SequenceNode):
            yield from ((item, False) for item in node.value)
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                sources = value.value if isinstance(value, SequenceNode) else [value]
                if key.tag == _MERGE_TAG and all(isinstance(s, MappingNode) for s in sources):
                    yield from ((source, True) for source in sources)
                else:
                    yield from ((key, False), (value, False))

    def build(self, node: Node, path: YamlPath) -> Any:
        self.smap.values.setdefault(path, Span.of(node))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            self._expect_tag(node, _SEQ_TAG)
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if not isinstance(node, MappingNode):
            raise self._error(node, "unsupported YAML node")
        self._expect_tag(node, _MAP_TAG)
        return self._mapping(node, path)

    def _mapping(self, node: MappingNode, path: YamlPath) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # resolves `<<:` merge keys
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self._error(key_node, "mapping keys must be plain scalars")
            key = self._scalar(key_node)
            if key in out:
                first = self.smap.keys[(*path, key)]
                raise self._error(
                    key_node, f"duplicate key {key!r} (first defined on line {first.line})"
                )
            self.smap.keys[(*path, key)] = Span.of(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out

    def _scalar(self, node: ScalarNode) -> Any:
        """A scalar as JSON would hold it: dates stay the text written; binary data,
        infinities, NaN and unpaired surrogates (`"\\ud800"`) are refused."""
        if node.tag == _TIMESTAMP_TAG:
            return node.value
        if node.tag not in _SCALAR_TAGS:
            raise self._error(node, f"unsupported YAML tag {node.tag!r}")
        try:
            value = self.loader.construct_object(node, deep=True)
        except ValueError as exc:  # e.g. an integer past Python's 4300-digit limit
            problem = "it has too many digits" if "digits" in str(exc) else str(exc)
            raise self._error(node, f"cannot read this number: {problem}; quote it") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self._error(node, f"{node.value} is not allowed: give a finite number")
        if isinstance(value, str) and not _encodable(value):
            raise self._error(node, "a lone surrogate (\\ud800-\\udfff) is not a character")
        return value

    def _expect_tag(self, node: Node, tag: str) -> None:
        if node.tag != tag:
            raise self._error(node, f"unsupported YAML tag {node.tag!r}")

    def _error(self, node: Node, message: str) -> ConfigError:
        span = Span.of(node)
        return self.smap.error_at(span.line, span.col, message, span.width)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _character_error(exc: yaml.reader.ReaderError, smap: SourceMap) -> ConfigError:
    """YAML refuses control characters (NUL, ESC, ...) anywhere in a file; say where."""
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    kind = "control character" if unicodedata.category(chr(code)) == "Cc" else "character"
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    line, col = position(smap.text, exc.position)
    message = (
        f"{kind} U+{code:04X} is not allowed in YAML; delete it, or write it as {escape} "
        "inside a double-quoted string"
    )
    return smap.error_at(line, col, message)


def _syntax_error(exc: yaml.MarkedYAMLError, smap: SourceMap) -> ConfigError:
    problem = exc.problem or "invalid YAML"
    mark = exc.problem_mark or exc.context_mark
    context = exc.context or ""
    if "quoted scalar" in context and exc.context_mark is not None:
        mark = exc.context_mark  # an unclosed quote: point at where it opened
        problem = "unclosed quoted string"
    message = f"YAML syntax error: {problem}"
    if context and "quoted scalar" not in context:
        message += f" ({context})"
    if "'\\t'" in problem:
        message += "; YAML does not allow tabs for indentation, use spaces"
    if mark is None:
        return ConfigError(message, file=smap.file)
    return smap.error_at(mark.line + 1, mark.column + 1, message)
