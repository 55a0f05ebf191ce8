"""Cross-references between sections: depends_on, context and foreach, with the
dependencies that context and foreach imply, and dependency cycles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from gen.errors import ConfigError
from gen.pipeline.graph import find_cycle
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.suggest import did_you_mean
from gen.pipeline.yaml_loader import SourceMap, YamlPath, format_path

Origins = dict[tuple[str, str], YamlPath]  # (section, dependency) -> what made the edge
Need = Callable[[str, YamlPath], None]


def fail(
    smap: SourceMap, where: YamlPath, message: str, at: Literal["key", "value"] = "value"
) -> ConfigError:
    """A ConfigError at `where` whose message starts with the path."""
    return smap.error(where, f"{format_path(where)}: {message}", at=at)


def check_references(pipeline: Pipeline, smap: SourceMap) -> Origins:
    """Check depends_on, context and foreach; add the dependencies context and foreach imply."""
    ids = [s.id for s in pipeline.sections]
    origins: Origins = {}
    for i, section in enumerate(pipeline.sections):
        at: YamlPath = ("sections", i)

        def need(dep: str, where: YamlPath, section: Section = section) -> None:
            add_dependency(section, dep, where, origins)

        for j, dep in enumerate(list(section.depends_on)):
            where = (*at, "depends_on", j)
            if dep == section.id:
                raise fail(smap, where, f"section {dep!r} depends on itself")
            if dep not in ids:
                raise fail(smap, where, f"unknown section id {dep!r}{did_you_mean(dep, ids)}")
            origins[(section.id, dep)] = where
        for j, entry in enumerate(section.context):
            where = (*at, "context", j)
            if entry == "previous":
                if i > 0:
                    need(ids[i - 1], where)
            elif entry == "all":
                for dep in ids[:i]:
                    need(dep, where)
            elif entry == section.id:
                raise fail(smap, where, "a section cannot be its own context")
            elif entry in ids:
                need(entry, where)
            else:
                raise fail(
                    smap,
                    where,
                    f"must be a section id, 'previous' or 'all', got {entry!r}"
                    f"{did_you_mean(entry, ids)}",
                )
        if section.foreach is not None:
            _check_foreach(pipeline, section, (*at, "foreach"), smap, need)
    return origins


def add_dependency(section: Section, dep: str, where: YamlPath, origins: Origins) -> None:
    if dep not in section.depends_on:
        section.depends_on.append(dep)
    origins.setdefault((section.id, dep), where)


def _check_foreach(
    pipeline: Pipeline, section: Section, where: YamlPath, smap: SourceMap, need: Need
) -> None:
    try:
        target = section.foreach_target()
    except ValueError as exc:
        raise fail(smap, where, str(exc)) from None
    if target is None:
        return
    kind, name = target
    if kind == "sections":
        ids = [s.id for s in pipeline.sections]
        if name not in ids:
            raise fail(smap, where, f"unknown section id {name!r}{did_you_mean(name, ids)}")
        if name == section.id:
            raise fail(smap, where, "a section cannot fan out over itself")
        if pipeline.section(name).parse == "text":
            message = f"section {name!r} has no `parse: list` (or json), so it has no items"
            raise fail(smap, where, message)
        need(name, where)
        return
    names = list(pipeline.inputs)
    if name not in names:
        raise fail(smap, where, f"unknown input {name!r}{did_you_mean(name, names)}")
    value = pipeline.inputs[name]
    if not isinstance(value, list):
        message = f"input {name!r} must be a list to fan out over, got {type(value).__name__}"
        raise fail(smap, where, f"{message} {value!r}")
    if not value:
        message = f"input {name!r} is an empty list, so this fan-out would write nothing"
        raise fail(smap, where, f"{message}; give it items, e.g. --set {name}='[a, b]'")


def check_cycles(pipeline: Pipeline, smap: SourceMap, origins: Origins) -> None:
    """Fail on the first dependency cycle, located where its first edge was declared."""
    cycle = find_cycle({s.id: s.depends_on for s in pipeline.sections})
    if cycle is not None:
        where = origins.get((cycle[0], cycle[1]), ())
        raise fail(smap, where, f"dependency cycle: {' -> '.join(cycle)}")
