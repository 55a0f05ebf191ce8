"""Static analysis of one parsed template: unknown variables, private attributes, and
`sections.<id>` references. Reports findings with template line numbers; locating them in
a file is the caller's job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from jinja2 import meta, nodes

from gen.pipeline.suggest import did_you_mean

_GUARD_FILTERS = frozenset({"default", "d"})
_GUARD_TESTS = frozenset({"defined", "undefined"})


@dataclass(frozen=True, slots=True)
class Scope:
    """What a template may read: variable names, hints for names that are known elsewhere,
    and the pipeline's sections (id -> parse mode) with the one being rendered."""

    known: frozenset[str]
    hints: Mapping[str, str] = field(default_factory=dict)
    sections: Mapping[str, str] = field(default_factory=dict)
    current: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    message: str
    lineno: int
    needle: str | None = None  # text to put the caret under, when it can be found
    from_end: bool = False  # the needle's last occurrence on the line, not its first

    def column(self, line: str) -> int:
        """0-based column of the needle in the template line, else of its first non-space."""
        if self.needle:
            col = line.rfind(self.needle) if self.from_end else line.find(self.needle)
            if col >= 0:
                return col
        return len(line) - len(line.lstrip())


@dataclass(slots=True)
class Analysis:
    findings: list[Finding] = field(default_factory=list)
    section_refs: list[str] = field(default_factory=list)  # ids read via sections.<id>
    names: frozenset[str] = frozenset()  # the variables it reads from its context
    includes: list[tuple[str, int]] = field(default_factory=list)  # (template name, line)


def analyze(ast: nodes.Template, scope: Scope, source: str = "") -> Analysis:
    """Findings ordered as they appear in `source` (the template text), first one first."""
    out = Analysis(names=frozenset(meta.find_undeclared_variables(ast)))
    out.findings += _private_access(ast)
    out.findings += _unknown_names(ast, scope)
    out.findings += _section_refs(ast, scope, out.section_refs)
    for node in ast.find_all((nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport)):
        target = getattr(node, "template", None)
        if isinstance(target, nodes.Const) and isinstance(target.value, str):
            out.includes.append((target.value, node.lineno))
    lines = source.splitlines()

    def position(f: Finding) -> tuple[int, int]:
        line = lines[f.lineno - 1] if 0 < f.lineno <= len(lines) else ""
        return f.lineno, f.column(line)

    out.findings.sort(key=position)
    return out


def _private_access(ast: nodes.Template) -> Iterator[Finding]:
    for node in ast.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        name: object = None
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            name = node.arg.value
        elif isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
            arg = node.args[0]
            name = arg.value if isinstance(arg, nodes.Const) else None
        if isinstance(name, str) and name.startswith("_"):
            yield Finding(
                f"access to {name!r} is blocked by the template sandbox "
                "(names starting with '_' are private)",
                node.lineno,
                name,
            )


def _unknown_names(ast: nodes.Template, scope: Scope) -> Iterator[Finding]:
    loads: dict[str, int] = {}
    guarded: set[str] = set()
    for name_node in ast.find_all(nodes.Name):
        if name_node.ctx == "load":
            loads.setdefault(name_node.name, name_node.lineno)
    for check in ast.find_all((nodes.Filter, nodes.Test)):
        if not isinstance(check, nodes.Filter | nodes.Test):
            continue
        guards = _GUARD_FILTERS if isinstance(check, nodes.Filter) else _GUARD_TESTS
        if check.name in guards and isinstance(check.node, nodes.Name):
            guarded.add(check.node.name)
    undeclared = meta.find_undeclared_variables(ast) - scope.known - guarded
    for name in sorted(undeclared, key=lambda n: loads.get(n, 0)):
        hint = scope.hints.get(name)
        if hint is None:
            hint = f"undefined variable {name!r}" + did_you_mean(
                name, sorted(scope.known), _known_list(scope)
            )
        yield Finding(hint, loads.get(name, 1), name)


def _known_list(scope: Scope) -> str:
    names = sorted(n for n in scope.known if not n.startswith("_"))
    return f" (known: {', '.join(names)})" if names else ""


def _section_refs(ast: nodes.Template, scope: Scope, refs: list[str]) -> Iterator[Finding]:
    items_of = {id(node.node): node for node in ast.find_all(nodes.Getattr) if node.attr == "items"}
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        if not isinstance(node, nodes.Getattr | nodes.Getitem):
            continue
        target = node.node
        if not (isinstance(target, nodes.Name) and target.name == "sections"):
            continue
        if isinstance(node, nodes.Getattr):
            ref: object = node.attr
        else:
            ref = node.arg.value if isinstance(node.arg, nodes.Const) else None
        if not isinstance(ref, str):
            continue
        if ref not in scope.sections:
            tip = did_you_mean(ref, scope.sections)
            yield Finding(f"sections.{ref}: no section has id {ref!r}{tip}", node.lineno, ref)
        elif ref == scope.current:
            yield Finding(f"sections.{ref}: a section cannot read its own text", node.lineno, ref)
        elif id(node) in items_of and scope.sections[ref] == "text":
            yield Finding(
                f"sections.{ref}.items: section {ref!r} has no `parse: list`, so no items",
                node.lineno,
                ref,
            )
        elif ref not in refs:
            refs.append(ref)
