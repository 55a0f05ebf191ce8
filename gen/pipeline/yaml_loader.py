"""YAML with positions: plain Python data plus a SourceMap of every key and value (1-based).

Knows YAML syntax, duplicate keys and locations; nothing about pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gen.errors import ConfigError
from gen.pipeline.snippet import located_error

YamlPath = tuple[Any, ...]  # mapping keys and sequence indices from the root
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


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
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        data = None if root is None else _Builder(loader, smap).build(root, ())
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, smap) from None
    finally:
        loader.dispose()
    return data, smap


class _Builder:
    """Constructs plain data from composed nodes while recording spans."""

    def __init__(self, loader: yaml.SafeLoader, smap: SourceMap) -> None:
        self.loader = loader
        self.smap = smap
        self.active: set[int] = set()

    def build(self, node: Node, path: YamlPath) -> Any:
        self.smap.values.setdefault(path, Span.of(node))
        if id(node) in self.active:
            raise self._error(node, "recursive YAML alias")
        if isinstance(node, ScalarNode):
            return self.loader.construct_object(node, deep=True)
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                self._expect_tag(node, _SEQ_TAG)
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            if not isinstance(node, MappingNode):
                raise self._error(node, "unsupported YAML node")
            self._expect_tag(node, _MAP_TAG)
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, path: YamlPath) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # resolves `<<:` merge keys
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self._error(key_node, "mapping keys must be plain scalars")
            key = self.loader.construct_object(key_node, deep=True)
            if key in out:
                first = self.smap.keys[(*path, key)]
                raise self._error(
                    key_node, f"duplicate key {key!r} (first defined on line {first.line})"
                )
            self.smap.keys[(*path, key)] = Span.of(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out

    def _expect_tag(self, node: Node, tag: str) -> None:
        if node.tag != tag:
            raise self._error(node, f"unsupported YAML tag {node.tag!r}")

    def _error(self, node: Node, message: str) -> ConfigError:
        span = Span.of(node)
        return self.smap.error_at(span.line, span.col, message, span.width)


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
