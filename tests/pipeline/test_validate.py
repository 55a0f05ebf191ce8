from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gen.backends
from gen.cli import main
from gen.errors import ConfigError, TemplateError
from gen.models import store
from gen.pipeline import load_pipeline, load_pipeline_text

from .conftest import WritePipeline

GOOD = Path(__file__).parent / "good" / "report.yaml"


def test_good_pipeline_loads() -> None:
    pipeline = load_pipeline(GOOD)
    assert pipeline.name == "tech-report"
    assert pipeline.model == "smollm2-135m"
    assert pipeline.file == str(GOOD)
    assert [s.id for s in pipeline.sections] == ["outline", "part", "summary"]
    assert pipeline.context.window == "auto" and pipeline.context.reserve == 256


def test_defaults_merge_into_sections() -> None:
    pipeline = load_pipeline(GOOD)
    outline, part, summary = (pipeline.settings_for(s) for s in pipeline.sections)
    assert (outline.temperature, outline.max_tokens, outline.seed) == (0.0, 256, 7)
    assert (part.temperature, part.max_tokens, part.top_p) == (0.7, 512, 0.9)
    assert summary.stop == ["THE END"]
    assert outline.system == "You are a careful writer on {{ topic }}."


def test_implied_dependencies() -> None:
    pipeline = load_pipeline(GOOD)
    # foreach and context add outline; context [all] adds every earlier section
    assert pipeline.section("part").depends_on == ["outline"]
    assert pipeline.section("summary").depends_on == ["outline", "part"]


def test_implied_dependencies_from_templates(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - {id: a, prompt: A}
          - {id: b, prompt: B}
          - {id: c, prompt: "{{ sections.a.text }} {{ sections.b }}"}
          - {id: d, prompt: D, depends_on: [a]}
        """
    )
    pipeline = load_pipeline(path)
    assert pipeline.section("c").depends_on == ["a", "b"]
    assert pipeline.section("d").depends_on == ["a"]
    assert pipeline.section("a").depends_on == pipeline.section("b").depends_on == []


def test_name_defaults_to_file_stem(write_pipeline: WritePipeline) -> None:
    path = write_pipeline("sections:\n  - {id: a, prompt: A}\n", name="my-report.yaml")
    assert load_pipeline(path).name == "my-report"


def test_overrides_apply_with_types(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        inputs:
          topic: tea
          n: 5
          ratio: 0.5
          formal: false
          chapters: [a, b]
        sections:
          - id: part
            foreach: inputs.chapters
            prompt: "{{ topic }} {{ n }} {{ ratio }} {{ formal }} {{ item }}"
        """
    )
    pipeline = load_pipeline(
        path,
        {"topic": "印刷术", "n": "7", "ratio": "2.5", "formal": "yes", "chapters": "[x, y, z]"},
    )
    assert pipeline.inputs == {
        "topic": "印刷术", "n": 7, "ratio": 2.5, "formal": True, "chapters": ["x", "y", "z"]
    }  # fmt: skip
    assert load_pipeline(path, {"n": 3}).inputs["n"] == 3  # typed values pass through


def test_unknown_override_is_located(write_pipeline: WritePipeline) -> None:
    path = write_pipeline("inputs:\n  topic: tea\nsections:\n  - {id: a, prompt: A}\n")
    with pytest.raises(ConfigError, match="--set topik: unknown input; did you mean 'topic'") as e:
        load_pipeline(path, {"topik": "x"})
    assert (e.value.line, e.value.col) == (1, 1)


def test_badly_typed_override(write_pipeline: WritePipeline) -> None:
    path = write_pipeline("inputs:\n  n: 5\nsections:\n  - {id: a, prompt: A}\n")
    with pytest.raises(ConfigError, match="--set n=many: must be an integer") as e:
        load_pipeline(path, {"n": "many"})
    assert (e.value.line, e.value.col) == (2, 3)


def test_override_can_break_foreach(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "inputs:\n  xs: [a]\nsections:\n  - {id: a, foreach: inputs.xs, prompt: '{{ item }}'}\n"
    )
    with pytest.raises(ConfigError, match="must be a list like"):
        load_pipeline(path, {"xs": "a, b"})


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_pipeline("no/such/pipeline.yaml")


def test_load_from_text_uses_project_templates() -> None:
    pipeline = load_pipeline_text("sections:\n  - {id: a, prompt: Hi}\n", file="<request>")
    assert pipeline.name == "pipeline" and pipeline.file == "<request>"
    with pytest.raises(TemplateError) as info:
        load_pipeline_text("sections:\n  - {id: a, prompt: '{{ x }}'}\n", file="<request>")
    assert info.value.file == "<request>" and info.value.line == 2


def test_cycle_through_template_reference(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - id: a
            prompt: "{{ sections.b.text }}"
          - id: b
            prompt: B
            depends_on: [a]
        """
    )
    with pytest.raises(ConfigError, match=r"dependency cycle: a -> b -> a") as info:
        load_pipeline(path)
    assert info.value.line == 3


def test_context_previous_depends_on_previous_section(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - {id: a, prompt: A}
          - {id: b, prompt: B}
          - {id: c, prompt: "{{ previous }}", context: [previous]}
        """
    )
    assert load_pipeline(path).section("c").depends_on == ["b"]


def test_template_file_checks_its_includes(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "sections:\n  - {id: a, template: main.j2}\n",
        templates={"main.j2": "Hi\n{% include 'missing.j2' %}\n"},
    )
    with pytest.raises(TemplateError, match=r"'missing\.j2' not found") as info:
        load_pipeline(path)
    assert info.value.file is not None and info.value.file.endswith("main.j2")
    assert (info.value.line, info.value.col) == (2, 13)


def test_unknown_variable_in_included_template(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "inputs: {topic: tea}\nsections:\n  - {id: a, template: main.j2}\n",
        templates={"main.j2": "{% include 'part.j2' %}", "part.j2": "{{ topic }}\n{{ nope }}"},
    )
    with pytest.raises(TemplateError, match="undefined variable 'nope'") as info:
        load_pipeline(path)
    assert info.value.file is not None and info.value.file.endswith("part.j2")
    assert (info.value.line, info.value.col) == (2, 4)


def test_default_filter_allows_undeclared_names(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - id: a
            prompt: "{{ n | default(5) }}{% if m is defined %}{{ m }}{% endif %}"
        """
    )
    load_pipeline(path)


def test_document_inline_and_template_exclusive(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "sections:\n  - {id: a, prompt: A}\ndocument:\n  template: d.j2\n  inline: x\n"
    )
    with pytest.raises(ConfigError, match="either template: or inline:") as info:
        load_pipeline(path)
    assert (info.value.line, info.value.col) == (5, 3)


def test_document_sees_only_document_names(write_pipeline: WritePipeline) -> None:
    path = write_pipeline("sections:\n  - {id: a, prompt: A}\ndocument:\n  inline: '{{ item }}'\n")
    with pytest.raises(TemplateError, match="only defined in section prompts"):
        load_pipeline(path)


def test_pipeline_package_stays_light() -> None:
    code = (
        "import sys, gen.pipeline\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'starlette', 'transformers')"
        " or m.startswith(('gen.engine', 'gen.models', 'gen.backends'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("prompt", "line", "col"),
    [
        ("|\n      Intro.\n\n      With {{ nope }}.\n", 6, 15),
        (">\n      folded text\n      with {{ nope }} here\n", 5, 15),
        ('"multi\n      line {{ nope }}"\n', 4, 15),
        ("'{{ nope }}'\n", 3, 17),
    ],
)
def test_inline_template_errors_point_into_the_yaml(
    write_pipeline: WritePipeline, prompt: str, line: int, col: int
) -> None:
    path = write_pipeline("sections:\n  - id: a\n    prompt: " + prompt)
    with pytest.raises(TemplateError, match="undefined variable 'nope'") as info:
        load_pipeline(path)
    assert (info.value.line, info.value.col) == (line, col)


# -- names in any script, and several errors at once -------------------------------------


def test_input_names_may_be_any_unicode_identifier(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "inputs:\n  主题: 茶\n  thème_2: x\n"
        "sections:\n  - {id: a, prompt: '写 {{ 主题 }} {{ thème_2 }}'}\n"
    )
    pipeline = load_pipeline(path, {"主题": "长城🧱"})
    assert pipeline.inputs == {"主题": "长城🧱", "thème_2": "x"}
    with pytest.raises(ConfigError, match="--set 主题x: unknown input; did you mean '主题'"):
        load_pipeline(path, {"主题x": "长城"})


def test_the_shipped_chinese_pipeline_takes_its_input_by_its_chinese_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = Path(__file__).parents[2] / "pipelines" / "zh-article.yaml"
    assert "--set 主题=长城" in path.read_text("utf-8")  # what its comment tells users
    assert main(["validate", str(path), "--set", "主题=长城"]) == 0
    first, *notes = capsys.readouterr().out.splitlines()
    assert first.endswith("ok (3 sections, model smollm2-135m)")
    # and it says how the body's context reaches the model
    assert notes == [
        "  body: context [previous]: previous added as a labelled block before the prompt "
        "(the template does not place it)"
    ]


def test_several_schema_errors_are_all_shown(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        "nme: x\ndefaults:\n  max_tokens: -1\n  top_p: 3\n  temperature: hot\n"
        "sections:\n  - {id: a, prompt: A}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path}:1:1: unknown top-level key 'nme'; did you mean 'name'?"
    assert lines[4:] == [
        f"{path}:3:15: defaults.max_tokens: must be > 0, got -1",
        f"{path}:4:10: defaults.top_p: must be <= 1.0, got 3",
        "(and 1 more error)",
    ]


def test_a_misspelt_required_key_is_one_error_with_its_hint(
    write_pipeline: WritePipeline,
) -> None:
    path = write_pipeline("name: x\nsection:\n  - {id: a, prompt: A}\n")
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert info.value.message == "unknown top-level key 'section'; did you mean 'sections'?"
    assert (info.value.line, info.value.col, info.value.notes) == (2, 1, ())


# -- what the run would refuse when it renders: gen validate says it first ---------------


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to load a model fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(gen.backends, "open_backend", refuse)
    monkeypatch.setattr(store, "prepare", refuse)


def validated(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize(
    ("yaml", "where", "message"),
    [
        (  # a macro calling itself
            "sections:\n  - id: a\n    prompt: |\n"
            "      {% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }} 茶 🍵\n",
            "4:7",
            "sections[0].prompt: blocked by the template sandbox: calls nested more than 60 "
            "deep (a macro calling itself?)",
        ),
        (  # a loop over a billion numbers, in a section that reads another's text
            "sections:\n  - {id: a, prompt: A}\n  - id: b\n    prompt: |\n"
            "      {{ sections.a.text }}\n      {% for i in range(10**9) %}.{% endfor %}\n",
            "6:7",
            "sections[1].prompt: blocked by the template sandbox: range() of 1,000,000,000 "
            "numbers; the limit is 100,000",
        ),
        (
            "defaults: {max_tokens: 1000000000000}\nsections:\n  - {id: a, prompt: A}\n",
            "1:24",
            "defaults.max_tokens: must be at most 2,147,483,647 (2**31 - 1), got "
            "1,000,000,000,000: a round writes no more tokens than the context window holds, "
            "and no model's window holds that many",
        ),
        (
            "defaults: {stop: ['。', '']}\nsections:\n  - {id: a, prompt: A}\n",
            "1:24",
            'defaults.stop[1]: a stop string must not be empty ("" marks no place in the '
            "text, and the engine refuses it); leave it out, or write `stop: []` for none",
        ),
    ],
)
def test_validate_refuses_what_the_run_would(
    write_pipeline: WritePipeline,
    capsys: pytest.CaptureFixture[str],
    yaml: str,
    where: str,
    message: str,
) -> None:
    path = write_pipeline(yaml)
    code, err = validated(path, capsys)
    assert code == 2
    assert err.splitlines()[0] == f"{path}:{where}: {message}"
    assert "Traceback" not in err


@pytest.mark.usefixtures("no_model")
def test_every_item_of_an_input_fan_out_is_rendered(
    write_pipeline: WritePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_pipeline(
        """
        inputs: {teas: [茶, ชาไทย, boom]}
        sections:
          - id: part
            foreach: inputs.teas
            prompt: "Write about {{ item }}.{% if item == 'boom' %}{{ 'x' * 10**9 }}{% endif %}"
        """
    )
    code, err = validated(path, capsys)
    assert code == 2
    assert err.startswith(f"{path}:5:14: sections[0].prompt: blocked by the template sandbox: ")


@pytest.mark.usefixtures("no_model")
def test_a_render_error_from_the_inputs_alone_is_refused(
    write_pipeline: WritePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_pipeline(
        """
        inputs: {topic: 茶, n: many}
        sections:
          - {id: a, prompt: "Write about {{ topic.colour }}."}
        """
    )
    code, err = validated(path, capsys)
    assert code == 2
    assert err.startswith(f"{path}:3:43: sections[0].prompt: undefined: 'str object' has no ")
    path = write_pipeline(
        """
        inputs: {topic: 茶, n: many}
        sections:
          - {id: a, prompt: "Write about {{ topic }}.", target_words: "{{ n }}"}
        """
    )
    code, err = validated(path, capsys)
    assert code == 2
    assert "sections.a.target_words: must render a number > 0, got 'many'" in err


@pytest.mark.usefixtures("no_model")
def test_what_only_the_model_text_decides_passes(
    write_pipeline: WritePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # a placeholder has no `title` key and renders no number, as a model's JSON item would
    path = write_pipeline(
        """
        inputs: {topic: 茶}
        sections:
          - {id: outline, prompt: "Plan {{ topic }}.", parse: list}
          - id: part
            foreach: sections.outline.items
            prompt: "Write about {{ item['title'] }} ({{ topic }})."
            target_words: "{{ item | int }}"
          - {id: end, prompt: "{{ sections.outline.text.lines }}", context: [outline]}
        """
    )
    code, err = validated(path, capsys)
    assert (code, err) == (0, "")
