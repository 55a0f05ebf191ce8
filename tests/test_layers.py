"""The dependency rule of the code map (README, docs/design.md §1): every module of gen imports
only from its own floor or the floors below it, and the engine stays free of the web and
config libraries. Read from the source with ast, so a new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GEN = Path(__file__).resolve().parents[1] / "gen"

# bottom to top; a module belongs to the longest prefix that names it
FLOORS: list[tuple[str, ...]] = [
    ("gen", "gen.errors", "gen.home", "gen.files", "gen.sampling", "gen.values"),
    ("gen.text",),
    ("gen.sources",),  # the user's documents: read, split, retrieve (torch-free)
    ("gen.engine",),
    ("gen.models",),
    ("gen.backends",),
    ("gen.export",),
    ("gen.pipeline",),  # the static half: load and check, templates
    ("gen.pipeline.run",),  # the running half
    ("gen.server", "gen.bench"),
    ("gen.cli",),
]
ENGINE_FREE_OF = ("pydantic", "jinja2", "yaml", "starlette", "uvicorn", "httpx")


def floor(module: str) -> int:
    best, level = -1, -1
    for i, names in enumerate(FLOORS):
        for name in names:
            nested = name != "gen" and module.startswith(name + ".")  # gen itself: only gen
            if (module == name or nested) and len(name) > best:
                best, level = len(name), i
    assert level >= 0, module
    return level


def module_name(path: Path) -> str:
    parts = path.relative_to(GEN.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, at any depth (lazy imports count)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from gen.bench import engine`: the names may be modules of their own
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


MODULES = sorted(GEN.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(GEN.parent)))
def test_imports_run_downward(path: Path) -> None:
    here = module_name(path)
    level = floor(here)
    upward = []
    for line, target in imports(path):
        if not (target == "gen" or target.startswith("gen.")):
            continue
        known = target
        while known.count(".") and not _exists(known):
            known = known.rsplit(".", 1)[0]
        if floor(known) > level:
            upward.append(f"{path.name}:{line} imports {target} ({FLOORS[floor(known)][0]})")
    assert not upward, f"{here} is on floor {FLOORS[level][0]}: " + "; ".join(upward)


def _exists(module: str) -> bool:
    base = GEN.parent.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@pytest.mark.parametrize("path", sorted((GEN / "engine").rglob("*.py")), ids=lambda p: p.name)
def test_engine_stays_free_of_web_and_config_libraries(path: Path) -> None:
    bad = [
        f"{line}: {target}"
        for line, target in imports(path)
        if target.split(".")[0] in ENGINE_FREE_OF
    ]
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", sorted((GEN / "sources").rglob("*.py")), ids=lambda p: p.name)
def test_sources_stay_free_of_torch_and_config_libraries(path: Path) -> None:
    """Reading the user's documents needs neither a model nor the pipeline's libraries."""
    bad = [
        f"{line}: {target}"
        for line, target in imports(path)
        if target.split(".")[0] in ("torch", *ENGINE_FREE_OF)
    ]
    assert not bad, f"{path.name} imports {bad}"


def test_every_module_is_on_a_floor() -> None:
    names = {module_name(p) for p in MODULES}
    assert "gen.text.words" in names and "gen.bench.engine" in names
    for name in names:
        floor(name)


def test_top_level_holds_no_benchmarks() -> None:
    assert not list(GEN.glob("bench*.py"))


def test_a_lower_import_is_caught(tmp_path: Path) -> None:
    """The rule itself: an engine module that imports the pipeline is reported."""
    fake = tmp_path / "mod.py"
    fake.write_text("def f():\n    from gen.pipeline.spec import Pipeline\n", encoding="utf-8")
    ((line, target),) = [(ln, t) for ln, t in imports(fake) if t == "gen.pipeline.spec"]
    assert line == 2
    assert floor(target) > floor("gen.engine.engine")
