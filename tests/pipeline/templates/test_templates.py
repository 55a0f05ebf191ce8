from __future__ import annotations

from pathlib import Path

import pytest
from jinja2 import TemplateNotFound

from gen.errors import TemplateError
from gen.pipeline import SectionResult, load_pipeline, prompt_variables, render_prompt
from gen.pipeline.templates.env import TemplateOutsideFolders, make_environment
from tests.pipeline.conftest import WritePipeline


def test_filters_slug_and_words(tmp_path: Path) -> None:
    env = make_environment([tmp_path])
    out = env.from_string("{{ 'Hello, World: Part 2' | slug }}|{{ text | words }}").render(
        text="活字印刷 changed Europe."
    )
    assert out == "hello-world-part-2|6"
    assert env.from_string("{{ '印刷术 的历史' | slug }}").render() == "印刷术-的历史"


def test_strict_undefined_and_no_autoescape(tmp_path: Path) -> None:
    env = make_environment([tmp_path])
    assert env.from_string("{{ x }}").render(x="<b>&</b>") == "<b>&</b>"
    with pytest.raises(Exception, match="'y' is undefined"):
        env.from_string("{{ y }}").render()


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/etc/passwd", "sub/../../x.j2", "..\\..\\x.j2"]
)
def test_loader_refuses_paths_outside(tmp_path: Path, name: str) -> None:
    env = make_environment([tmp_path])
    with pytest.raises(TemplateOutsideFolders, match="outside the template folders"):
        env.get_template(name)


def test_loader_refuses_symlinks_out(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    root = tmp_path / "templates"
    root.mkdir()
    (root / "link.j2").symlink_to(secret)
    env = make_environment([root])
    with pytest.raises(TemplateOutsideFolders, match="resolves outside"):
        env.get_template("link.j2")


def test_loader_missing_template_lists_folders(tmp_path: Path) -> None:
    env = make_environment([tmp_path])
    with pytest.raises(TemplateNotFound, match=str(tmp_path)):
        env.get_template("nope.j2")


def _one_section(write_pipeline: WritePipeline, prompt: str, **templates: str) -> Path:
    text = f"inputs:\n  topic: tea\nsections:\n  - id: a\n    prompt: {prompt}\n"
    return write_pipeline(text, templates=templates)


def test_sandbox_blocks_at_render_time(write_pipeline: WritePipeline) -> None:
    # a name computed from an input slips past the static check; the sandbox still stops it
    path = _one_section(write_pipeline, "\"{{ topic | attr(topic ~ 'class' ~ topic) }}\"")
    pipeline = load_pipeline(path, {"topic": "__"})
    section = pipeline.sections[0]
    with pytest.raises(TemplateError, match="blocked by the template sandbox") as info:
        render_prompt(pipeline, section, prompt_variables(pipeline, section, {}))
    assert info.value.line == 5


def test_undefined_attribute_at_render_is_located(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - {id: a, prompt: A}
          - id: b
            prompt: |
              Intro.
              Use {{ sections.a.txt }} here.
        """
    )
    pipeline = load_pipeline(path)
    section = pipeline.section("b")
    variables = prompt_variables(pipeline, section, {"a": SectionResult("a", "text")})
    with pytest.raises(
        TemplateError, match=r"a section result has no attribute 'txt' \(it has \.text"
    ) as info:
        render_prompt(pipeline, section, variables)
    assert (info.value.line, info.value.col) == (6, 25)
    assert "^^^" in str(info.value)


def test_render_error_inside_template_file(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "sections:\n  - {id: a, prompt: A}\n  - {id: b, template: b.j2}\n",
        templates={"b.j2": "line one\n{{ sections.a.text + 1 }}\n"},
    )
    pipeline = load_pipeline(path)
    section = pipeline.section("b")
    variables = prompt_variables(pipeline, section, {"a": SectionResult("a", "x")})
    with pytest.raises(TemplateError, match="TypeError") as info:
        render_prompt(pipeline, section, variables)
    assert info.value.file is not None and info.value.file.endswith("b.j2")
    assert info.value.line == 2


def test_missing_section_result_is_a_template_error(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "sections:\n  - {id: a, prompt: A}\n  - {id: b, prompt: '{{ sections.a }}'}\n"
    )
    pipeline = load_pipeline(path)
    section = pipeline.section("b")
    with pytest.raises(TemplateError, match="undefined"):
        render_prompt(pipeline, section, prompt_variables(pipeline, section, {}))
