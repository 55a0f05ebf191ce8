"""The compiled templates of one pipeline: compile and statically check each (inline in the
YAML or a file), render them, and turn every Jinja failure into a located TemplateError.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Template, TemplateNotFound, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from gen.errors import SandboxError, TemplateError
from gen.pipeline.snippet import located_error
from gen.pipeline.templates.check import Finding, Scope, analyze
from gen.pipeline.templates.env import ConfinedLoader, display_name
from gen.pipeline.templates.variables import SectionResult
from gen.pipeline.yaml_loader import SourceMap, YamlPath, format_path

_QUOTED = re.compile(r"'([^']+)'")
_OPEN = re.compile(r"\{[{%]")
# characters inside {{ }} and {% %} in all of a pipeline's templates: Jinja parses and
# compiles them at roughly 50 µs each, so 50,000 take a few seconds
MAX_CODE = 50_000


@dataclass(frozen=True, slots=True)
class _Origin:
    """Where a template's text lives: inline at `path` in the YAML, or in the file `filename`."""

    label: str
    text: str
    path: YamlPath | None = None
    filename: str | None = None


class TemplateSet:
    """Every template of a pipeline, keyed by the YAML path that names it."""

    def __init__(self, env: SandboxedEnvironment, smap: SourceMap) -> None:
        self.env = env
        self.smap = smap
        self._compiled: dict[YamlPath, tuple[Template, _Origin]] = {}
        self._inline: dict[str, _Origin] = {}  # compiled filename -> origin
        self._reads: dict[YamlPath, set[str]] = {}  # variables and sections.<id> read
        self._code = 0  # characters of template code compiled so far

    def __contains__(self, path: YamlPath) -> bool:
        return tuple(path) in self._compiled

    @property
    def _loader(self) -> ConfinedLoader:
        loader = self.env.loader
        if not isinstance(loader, ConfinedLoader):
            raise TypeError("templates need the environment from template_env.make_environment")
        return loader

    def add_inline(self, path: YamlPath, text: str, scope: Scope) -> list[str]:
        """Compile and check an inline template; returns the section ids it reads."""
        label = format_path(path)
        origin = _Origin(label, text, path=path)
        filename = f"<{label}>"
        self._inline[filename] = origin
        self._charge(origin)
        try:
            ast = self.env.parse(text, filename=filename)
            code = self.env.compile(ast, filename=filename)
        except TemplateSyntaxError as exc:
            raise self._syntax_error(exc, origin) from None
        except (RecursionError, SyntaxError) as exc:
            raise self._too_deep(exc, origin) from None
        template = self.env.template_class.from_code(self.env, code, self.env.make_globals(None))
        self._compiled[path] = (template, origin)
        return self._check(ast, origin, scope, set(), self._reads.setdefault(path, set()))

    def add_file(self, path: YamlPath, name: str, scope: Scope) -> list[str]:
        """Load, compile and check the template file `name` named at `path`."""
        label = f"{format_path(path)} {name!r}"
        filename: str | None = None
        try:
            source, filename, _ = self._loader.get_source(self.env, name)
            self._charge(_Origin(label, source, filename=filename))
            template = self.env.get_template(name)
        except TemplateNotFound as exc:
            span = self.smap.value_span(path)
            message = f"{format_path(path)}: {exc.message}"
            raise self._at(span.line, span.col, message, span.width) from None
        except TemplateSyntaxError as exc:
            raise self._syntax_error(exc, self._file_origin(label, exc.filename)) from None
        except (RecursionError, SyntaxError) as exc:
            raise self._too_deep(exc, self._file_origin(label, filename)) from None
        origin = self._file_origin(label, template.filename)
        self._compiled[path] = (template, origin)
        return self._check(
            self.env.parse(origin.text, name, template.filename),
            origin,
            scope,
            {name},
            self._reads.setdefault(path, set()),
        )

    def reads(self, path: YamlPath) -> frozenset[str]:
        """The variables the template at `path` reads (its includes too), and each section
        it reads as `sections.<id>`, named "sections.<id>"."""
        return frozenset(self._reads.get(tuple(path), ()))

    def render(self, path: YamlPath, variables: dict[str, Any]) -> str:
        template, origin = self._compiled[tuple(path)]
        try:
            return template.render(variables)
        except TemplateError:
            raise
        except Exception as exc:
            raise self._render_error(exc, origin) from None

    # -- static checks ------------------------------------------------------------------

    def _check(
        self, ast: Any, origin: _Origin, scope: Scope, seen: set[str], reads: set[str]
    ) -> list[str]:
        analysis = analyze(ast, scope, origin.text)
        if analysis.findings:
            raise self._locate(origin, analysis.findings[0])
        refs = list(analysis.section_refs)
        reads |= analysis.names | {f"sections.{ref}" for ref in refs}
        for name, lineno in analysis.includes:
            if name in seen:
                continue
            seen.add(name)
            try:
                source, filename, _ = self._loader.get_source(self.env, name)
                self._charge(_Origin(f"template {name!r}", source, filename=filename))
                sub = self.env.parse(source, name, filename)
            except TemplateNotFound as exc:
                raise self._locate(origin, Finding(exc.message or name, lineno, name)) from None
            except TemplateSyntaxError as exc:
                raise self._syntax_error(
                    exc, self._file_origin(f"template {name!r}", exc.filename)
                ) from None
            except RecursionError as exc:
                included = self._file_origin(f"template {name!r}", filename)
                raise self._too_deep(exc, included) from None
            sub_origin = _Origin(f"template {name!r}", source, filename=filename)
            found = self._check(sub, sub_origin, scope, seen, reads)
            refs += [r for r in found if r not in refs]
        return refs

    def _charge(self, origin: _Origin) -> None:
        """Count the template's code toward MAX_CODE before it is parsed."""
        text, at = origin.text, 0
        while (found := _OPEN.search(text, at)) is not None:
            close = text.find("}}" if found.group() == "{{" else "%}", found.end())
            at = len(text) if close < 0 else close + 2
            self._code += at - found.start()
        if self._code > MAX_CODE:
            message = (
                f"the pipeline's templates hold more than {MAX_CODE:,} characters inside "
                "{{ }} and {% %}, more than gen compiles; give long data as inputs"
            )
            raise self._locate(origin, Finding(message, 1))

    # -- errors -------------------------------------------------------------------------

    def _too_deep(self, exc: RecursionError | SyntaxError, origin: _Origin) -> TemplateError:
        """Python cannot compile the template: it nests past the recursion limit, or more
        than 20 loops and blocks deep."""
        reason = exc.msg if isinstance(exc, SyntaxError) else "past Python's recursion limit"
        return self._locate(origin, Finding(f"the template nests too deeply ({reason})", 1))

    def _file_origin(self, label: str, filename: str | None) -> _Origin:
        text = Path(filename).read_text(encoding="utf-8") if filename else ""
        return _Origin(label, text, filename=filename)

    def _syntax_error(self, exc: TemplateSyntaxError, origin: _Origin) -> TemplateError:
        lineno = exc.lineno or 1
        lines = origin.text.splitlines()
        line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        quoted = [q for q in _QUOTED.findall(exc.message or "") if q in line]
        needle = quoted[-1] if quoted else None
        message = f"template syntax error: {exc.message}"
        return self._locate(origin, Finding(message, lineno, needle, from_end=True))

    def _render_error(self, exc: Exception, origin: _Origin) -> TemplateError:
        lineno = 1
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename in self._inline:
                origin, lineno = self._inline[frame.filename], frame.lineno or 1
                break
            if frame.filename in self._loader.loaded:
                origin, lineno = self._file_origin(origin.label, frame.filename), frame.lineno or 1
                break
        quoted = _QUOTED.findall(str(exc))
        needle = quoted[0] if quoted else None
        kind: type[TemplateError] = TemplateError
        if isinstance(exc, SecurityError | RecursionError):  # whatever values it is given
            kind = SandboxError
        if isinstance(exc, SecurityError):
            message = f"blocked by the template sandbox: {exc}"
            needle = next((q for q in quoted if q.startswith("_")), needle)
        elif isinstance(exc, UndefinedError):
            message = f"undefined: {exc}".replace(
                f"'{SectionResult.__module__}.SectionResult object'", "a section result"
            )
            if "a section result" in message:
                message += " (it has .text, .items, .title, .parts)"
            needle = quoted[-1] if quoted else None
        elif isinstance(exc, TemplateNotFound):
            message = exc.message or f"template {exc.name!r} not found"
        elif isinstance(exc, TemplateSyntaxError):
            message = f"template syntax error: {exc.message}"
        elif isinstance(exc, RecursionError):  # macros and loops stop sooner (template_limits)
            message = "failed to render: too deep (includes of each other, or a nested value)"
        else:
            message = f"failed to render: {type(exc).__name__}: {exc}"
        return self._locate(origin, Finding(message, lineno, needle), kind)

    def _at(
        self,
        line: int,
        col: int,
        message: str,
        width: int = 1,
        kind: type[TemplateError] = TemplateError,
    ) -> TemplateError:
        smap = self.smap
        return located_error(message, smap.file, smap.lines, line, col, width, kind)

    def _locate(
        self, origin: _Origin, finding: Finding, kind: type[TemplateError] = TemplateError
    ) -> TemplateError:
        message = f"{origin.label}: {finding.message}"
        tlines = origin.text.splitlines()
        tline = tlines[finding.lineno - 1] if 0 < finding.lineno <= len(tlines) else ""
        tcol = finding.column(tline)
        width = len(finding.needle) if finding.needle and finding.needle in tline else 1
        if origin.path is None:
            file = display_name(origin.filename or "<template>")
            line, col = min(finding.lineno, max(len(tlines), 1)), tcol + 1
            return located_error(message, file, tlines, line, col, width, kind)
        span = self.smap.value_span(origin.path)
        lines = self.smap.lines
        if span.style == "|":  # literal block: template line n is file line header + n
            candidates = [span.line + finding.lineno]
        elif span.style == ">":  # folded block: lines were joined; search its body
            candidates = list(range(span.line + 1, span.end_line + 1))
        elif span.line == span.end_line:
            candidates = [span.line]
        else:  # a multi-line flow scalar: search the whole value
            candidates = list(range(span.line, span.end_line + 1))
        candidates = [n for n in candidates if 0 < n <= len(lines)]
        # the template line as it stands in the YAML, then the needle alone
        indent = len(tline) - len(tline.lstrip())
        attempts = [(tline.strip(), tcol - indent), (finding.needle or "", 0)]
        for needle, shift in attempts:
            for line in candidates if needle else []:
                start = span.col - 1 if line == span.line else 0
                found = lines[line - 1].find(needle, start)
                if found >= 0:
                    col = found + shift + 1
                    return self._at(line, col, message, width, kind)
        return self._at(span.line, span.col, message, span.width, kind)
