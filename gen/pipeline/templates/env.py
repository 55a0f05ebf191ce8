"""The Jinja2 sandbox for prompts and documents: search folders, a loader that stays inside
them, StrictUndefined, the `slug` / `words` / `last_words` / `headline` / `script` filters,
and the cost limits of template_limits.py. No pipeline knowledge here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from jinja2 import FileSystemLoader, StrictUndefined, TemplateNotFound
from jinja2.environment import Environment
from jinja2.sandbox import SandboxedEnvironment

from gen.errors import TemplateError
from gen.pipeline.length import script_of
from gen.pipeline.snippet import decode_source
from gen.pipeline.templates.limits import GLOBALS, SIZED_FILTERS, LimitedSandbox, counted
from gen.text.headline import headline
from gen.text.words import count_words, last_words, slugify

_REPO_TEMPLATES = Path(__file__).resolve().parents[3] / "templates"


class TemplateOutsideFolders(TemplateNotFound):
    """A template name that would leave the template folders ('..', absolute, symlink out)."""


def template_dirs(base_dir: Path | None) -> list[Path]:
    """Where template files are looked up, first match wins: the pipeline's folder, its
    `templates/`, the project's `templates/` (beside the pipeline folder, in the working
    directory, in the source checkout)."""
    candidates: list[Path] = []
    if base_dir is not None:
        candidates += [base_dir, base_dir / "templates", base_dir.parent / "templates"]
    candidates += [Path.cwd() / "templates", _REPO_TEMPLATES]
    out: list[Path] = []
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_dir() and resolved not in out:
            out.append(resolved)
    return out


class ConfinedLoader(FileSystemLoader):
    """A FileSystemLoader that refuses names and files outside its folders."""

    def __init__(self, searchpath: Sequence[Path]) -> None:
        super().__init__([str(p) for p in searchpath])
        self.roots = [Path(p).resolve() for p in searchpath]
        self.loaded: set[str] = set()  # file names handed out, to spot template frames

    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        pieces = template.replace("\\", "/").split("/")
        if template.startswith(("/", "\\")) or ".." in pieces or ":" in pieces[0]:
            raise TemplateOutsideFolders(
                template, f"template path {template!r} points outside the template folders"
            )
        if any(p.startswith(".") and p != "." for p in pieces):  # .env, .git/: no templates
            raise TemplateOutsideFolders(
                template, f"template path {template!r} names a hidden file or folder"
            )
        if not self.roots:
            raise TemplateNotFound(
                template, f"template {template!r} not found (no template folder)"
            )
        found = next((p for p in (Path(r, *pieces) for r in self.searchpath) if p.is_file()), None)
        if found is not None and not self._inside(found):  # checked before a byte is read
            raise TemplateOutsideFolders(
                template, f"template {template!r} resolves outside the template folders"
            )
        try:
            source, filename, uptodate = super().get_source(environment, template)
        except TemplateNotFound:
            folders = ", ".join(str(r) for r in self.roots)
            raise TemplateNotFound(
                template, f"template {template!r} not found in {folders}"
            ) from None
        except UnicodeDecodeError:  # read it again as bytes: the error names line and column
            path = next(root / template for root in self.roots if (root / template).is_file())
            decode_source(path.read_bytes(), display_name(str(path)), TemplateError)
            raise  # it is UTF-8 now: it was rewritten in between
        self.loaded.add(filename)
        return source, filename, uptodate

    def _inside(self, path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved.is_relative_to(root) for root in self.roots)


def display_name(filename: str) -> str:
    """A file as users would type it: relative to the working directory if inside."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def make_environment(dirs: Sequence[Path]) -> SandboxedEnvironment:
    """The sandboxed environment every template of a pipeline is compiled in."""
    env = LimitedSandbox(
        loader=ConfinedLoader(dirs),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        SIZED_FILTERS,
        slug=slugify,
        words=count_words,
        last_words=last_words,
        headline=headline,
        script=script_of,
    )
    env.filters = {name: counted(name, f) for name, f in env.filters.items()}
    env.globals.update(GLOBALS)
    return env
