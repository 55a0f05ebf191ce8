"""Template and path safety: sandbox escapes and runaway templates are refused at the
template's place, quickly and in little memory; includes stay in the template folders;
record keys and pipeline names cannot leave the output folder; `--out` at a file is refused
before a model loads."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2.loaders
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from gen.cli import main
from gen.errors import ConfigError, GenError, TemplateError
from gen.pipeline import (
    load_pipeline,
    load_pipeline_text,
    prompt_variables,
    render_prompt,
)
from gen.pipeline.records import read_records
from gen.pipeline.run.rundir import RunDir
from gen.pipeline.templates import limits as template_limits
from tests.pipeline.fake_backend import FakeBackend, install
from tests.reliability import hangs, soak

LIMIT_S = 10.0  # a guard against a hang; the limits themselves act well within it
PROMPT_LINE = 6  # where pipeline() puts the prompt


def time_limit(seconds: float = LIMIT_S) -> contextlib.AbstractContextManager[None]:
    return hangs.time_limit(seconds)


def pipeline(prompt: str) -> str:
    return (
        "name: safety\n"
        "inputs: {topic: tea, name: part.j2, big: 1000}\n"
        "sections:\n"
        "  - id: a\n"
        "    prompt: |\n"
        f"      {prompt}\n"
    )


def rendered(text: str, file: str = "p.yaml", base_dir: Path | None = None) -> str:
    """Load the pipeline and render its one prompt: the text, or the error of either step."""
    with time_limit():
        p = load_pipeline_text(text, file=file, base_dir=base_dir)
        section = p.sections[0]
        return render_prompt(p, section, prompt_variables(p, section, {}))


def refusal(prompt: str) -> TemplateError:
    soak.record("inputs tried")
    with pytest.raises(TemplateError) as info:
        rendered(pipeline(prompt))
    error = info.value
    assert (error.file, error.line) == ("p.yaml", PROMPT_LINE), str(error)
    assert str(error).startswith(f"p.yaml:{PROMPT_LINE}:")
    assert "sections[0].prompt: " in str(error)
    return error


def peak_memory(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(GenError):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- escapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ self._TemplateReference__context }}",
        "{{ lipsum.__globals__['os'] }}",
        "{{ topic['__class__'] }}",
        "{{ topic | attr('__class__') }}",
        "{{ topic | attr('__cla' ~ 'ss__') }}",
        "{{ (topic | attr('__cla' ~ 'ss__')) | attr('__subcl' ~ 'asses__') }}",
        "{{ '{0.__class__.__mro__}'.format(topic) }}",
        "{{ '{x.__class__}'.format_map({'x': topic}) }}",
        "{{ dict.mro() }}",
        "{{ [].append(1) }}{{ {}.update(a=1) }}",
        "{{ topic.translate({}) }}",
        "{{ topic.encode() }}",
    ],
)
def test_sandbox_escapes_are_refused(prompt: str) -> None:
    error = refusal(prompt)
    assert "sandbox" in str(error) or "unsafe" in str(error) or "private" in str(error)


# -- runaway work and memory ----------------------------------------------------------------

RUNAWAY = {
    "range": ("{{ range(10**9) | length }}", "range() of 1,000,000,000 numbers"),
    "range past a C long": ("{{ range(10**30) | length }}", "range() of"),
    "string repetition": ("{{ ('a' * 10**10) | length }}", "a repeated text or list would be"),
    "list repetition": ("{{ (['a'] * 10**10) | length }}", "a repeated text or list would be"),
    "power": ("{{ 10 ** 1000000 }}", "bits"),
    "product": ("{% set ns = namespace(n=2**60) %}"
                "{% for i in range(60) %}{% set ns.n = ns.n * ns.n %}{% endfor %}", "bits"),
    "doubling with ~": ("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "a text would be"),
    "doubling with +": ("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                        "{% set ns.s = ns.s + ns.s %}{% endfor %}", "a joined text or list"),
    "nested loops": ("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}"
                     "{% endfor %}", "steps"),
    "recursive macro": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                        "calls nested more than"),
    "exponential macro": ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                          "{% endmacro %}{{ f(40) }}", "steps"),
    "recursive loop": ("{% for x in [1] recursive %}{{ loop(range(99999)) }}{% endfor %}",
                       "calls nested more than"),
    "caller": ("{% macro m() %}{{ caller() }}{% endmacro %}{% macro f() %}{% call m() %}"
               "{{ f() }}{% endcall %}{% endmacro %}{{ f() }}", "calls nested more than"),
    "percent width": ("{{ '%0999999999d' % 1 }}", "a formatted field would be"),
    "percent star": ("{{ '%*d' % (999999999, 1) }}", "'*' width"),
    "format width": ("{{ '{:>999999999}'.format(1) }}", "a formatted field would be"),
    "nested format width": ("{{ '{:>{w}}'.format(1, w=999999999) }}", "a formatted field"),
    "format filter": ("{{ '%0999999999d' | format(1) }}", "a formatted field"),
    "center": ("{{ topic | center(10**9) }}", "a centered text would be"),
    "ljust": ("{{ topic.ljust(10**9) }}", "a padded text would be"),
    "indent": ("{{ ('a\\n' * 100000) | indent(1000) }}", "an indented text would be"),
    "wordwrap": ("{{ ('a ' * 100000) | wordwrap(1, wrapstring='x' * 10000) }}", "wrapped"),
    "replace": ("{{ ('x' * 100000).replace('x', 'y' * 1000) }}", "a replaced text would be"),
    "replace filter": ("{{ ('x' * 100000) | replace('x', 'y' * 1000) }}", "a replaced text"),
    "join": ("{{ (['x'] * 1000000) | join('y' * 100) }}", "a joined text would be"),
    "join method": ("{{ ('y' * 100).join(['x'] * 1000000) }}", "a joined text would be"),
    "batch": ("{{ range(3) | batch(10**9, 0) | list }}", "a batch would be"),
    "slice": ("{{ range(3) | slice(10**9) | list }}", "a slice count would be"),
    "lipsum": ("{{ lipsum(10**7) }}", "lorem ipsum would be"),
    "output": ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "the output would be"),
    "text of a list": ("{{ ['x' * 8000000] * 1000 }}", "a text would be"),
    "~ with a list": ("{{ 'a' ~ (['x' * 8000000] * 1000) }}", "a text would be"),
    "string filter": ("{{ (['x' * 8000000] * 1000) | string }}", "a text would be"),
    "tojson": ("{{ {'a': ['x' * 8000000] * 1000} | tojson }}", "a text would be"),
    "% with a list": ("{{ '%s' % ((['x' * 8000000] * 1000),) }}", "a formatted text would be"),
    "format with a list": ("{{ '{}'.format(['x' * 8000000] * 1000) }}", "a text would be"),
    "join of lists": ("{{ [['x' * 8000000] * 1000] | join }}", "a joined text would be"),
    "sum of lists": ("{{ ([['x'] * 8000000] * 1000) | sum(start=[]) }}", "a sum would be"),
    "total made": ("{% for i in range(100) %}{% set s = 'y' * 7000000 %}{% endfor %}",
                   "makes more than 64,000,000 characters"),
}  # fmt: skip


@pytest.mark.parametrize(("prompt", "message"), RUNAWAY.values(), ids=list(RUNAWAY))
def test_runaway_templates_stop_fast_at_their_line(prompt: str, message: str) -> None:
    start = time.monotonic()
    error = refusal(prompt)
    assert time.monotonic() - start < 5, "a limit acts within seconds"
    assert "blocked by the template sandbox: " in str(error)
    assert message in str(error)


@pytest.mark.parametrize(
    "name",
    [
        "string repetition",
        "doubling with ~",
        "output",
        "total made",
        "format width",
        "join",
        "text of a list",
        "~ with a list",
        "sum of lists",
    ],
)
def test_runaway_templates_stay_small(name: str) -> None:
    prompt, _ = RUNAWAY[name]
    peak = peak_memory(lambda: rendered(pipeline(prompt)))
    assert peak < 128 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("{% if 1 %}" * 2000 + "x" + "{% endif %}" * 2000, "nests too deeply (past Python's"),
        ("{% for i in [1] %}" * 25 + "x" + "{% endfor %}" * 25, "too many statically nested"),
        ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nests too deeply"),
        ("{{ topic" + "|string" * 5000 + " }}", "nests too deeply"),
        ("{{ " + "+".join(["1"] * 20000) + " }}", "nests too deeply"),
        (" ".join(["{{ topic }}"] * 20000), "more than 50,000 characters inside {{ }}"),
        ("{{ [" + "1," * 200000 + "] }}", "more than 50,000 characters inside {{ }}"),
        ("{{ topic " * 20000, "more than 50,000 characters inside {{ }}"),
    ],
    ids=["ifs", "loops", "parentheses", "filters", "sum", "tags", "list", "unclosed"],
)
def test_templates_too_big_to_compile_are_refused_fast(prompt: str, message: str) -> None:
    start = time.monotonic()
    error = refusal(prompt)
    assert time.monotonic() - start < 5
    assert message in str(error)


def test_a_render_past_its_time_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_limits, "MAX_SECONDS", 0.0)
    error = refusal("{% for i in range(10) %}{{ i }}{% endfor %}")
    assert "ran for more than 0 s" in str(error)


def test_include_of_itself_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "again.j2").write_text("x{% include 'again.j2' %}", "utf-8")
    with pytest.raises(TemplateError, match="too deep") as info:
        rendered(pipeline("{% include 'again.j2' %}"), base_dir=tmp_path)
    assert str(info.value).startswith(str(tmp_path / "templates" / "again.j2") + ":1:")


def test_ordinary_templates_are_not_limited() -> None:
    prompt = (
        "{% set ns = namespace(n=0) %}{% for i in range(20000) %}{% set ns.n = ns.n + i %}"
        "{% endfor %}{{ ns.n }} {{ ('ab' * 1000000) | length }} {{ 2 ** 64 }} "
        "{{ '%5.1f|%-4s|%d' % (3.14159, 'x', 7) }} {{ '{:>6}|{:,}'.format('tea', 10**6) }} "
        "{{ [1, 'a', none] }} {{ 'a' ~ 1 ~ [2] }} {{ [[1], [2]] | sum(start=[]) }} "
        "{{ topic | center(9) }}|{{ [1, 2] | join(', ') }} {{ range(5) | batch(2) | list }} "
        "{{ ('a b ' * 1000) | wordwrap(20) | length }} {{ topic.replace('t', 'T') }}"
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %} {{ f(20) }}"
        "{{ 'x' * 1000000 }}"
    )
    text = rendered(pipeline(prompt))
    assert text.startswith(
        "199990000 2000000 18446744073709551616 "
        "  3.1|x   |7    tea|1,000,000 [1, 'a', None] a1[2] [1, 2] "
        "   tea   |1, 2 [[0, 1], [2, 3], [4]] 3999 Tea "
        "01234567891011121314151617181920"
    )
    assert text.endswith("x" * 1000000)


def test_each_render_has_the_whole_budget() -> None:
    text = pipeline("{% for i in range(60000) %}{% endfor %}{{ topic }}")
    p = load_pipeline_text(text, file="p.yaml")
    for _ in range(5):  # 300,000 steps in all, past MAX_STEPS for a single render
        assert render_prompt(p, p.sections[0], prompt_variables(p, p.sections[0], {})) == "tea"


TEMPLATE_PIECES = st.sampled_from(
    [
        "{{", "}}", "{%", "%}", "{#", "#}", " ", "x", "topic", "big", "n", "item", "loop",
        "self", "cycler", "range(", ")", "(", "[", "]", ",", ".", "|", "~", "*", "**", "+",
        "%", "'", '"', "__class__", "_", "attr(", "format", "join", "center(", "10**9",
        "for i in", "endfor", "if", "endif", "macro m()", "endmacro", "m()", "set x =",
        "include", "'../x'", "import", "extends", "call", "endcall", "caller()", "raw",
        "endraw", "filter upper", "endfilter", "block b", "endblock", "-", "\n", "1",
    ]
)  # fmt: skip


@settings(
    max_examples=soak.examples(200, 2000),
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
@given(st.lists(TEMPLATE_PIECES, max_size=30).map("".join))
def test_random_template_text_renders_or_fails_at_its_place(prompt: str) -> None:
    soak.record("inputs tried")
    text = pipeline(prompt.replace("\n", "\n      "))  # each line inside the block
    try:
        rendered(text)
    except TemplateError as error:
        assert str(error).startswith("p.yaml:") and error.line and error.line >= PROMPT_LINE
    except ConfigError as error:  # YAML could not hold the text
        assert re.match(r"p\.yaml:\d+:\d+: ", str(error)), str(error)


# -- includes outside the template folders ---------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp/project/{p.yaml, templates/}; tmp/outside/secret.txt; symlinks out of templates/."""
    root = tmp_path / "project"
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "part.j2").write_text("part about {{ topic }}", "utf-8")
    (root / "templates" / ".env").write_text("API_KEY=secret", "utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret", "utf-8")
    (root / "templates" / "link.j2").symlink_to(outside / "secret.txt")
    (root / "templates" / "folder").symlink_to(outside, target_is_directory=True)
    return root


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("{% include '../../outside/secret.txt' %}", "points outside the template folders"),
        ("{% include '/etc/passwd' %}", "points outside the template folders"),
        ("{% include 'templates/../../outside/secret.txt' %}", "points outside"),
        ("{% include '..\\\\..\\\\outside\\\\secret.txt' %}", "points outside"),
        ("{% include 'C:/Windows/win.ini' %}", "points outside"),
        ("{% import '/etc/passwd' as m %}", "points outside"),
        ("{% from '../x.j2' import m %}", "points outside"),
        ("{% extends '/etc/passwd' %}", "points outside"),
        ("{% include 'link.j2' %}", "resolves outside the template folders"),
        ("{% include 'folder/secret.txt' %}", "resolves outside the template folders"),
        ("{% include '.env' %}", "names a hidden file or folder"),
        ("{% include 'templates/.env' %}", "names a hidden file or folder"),
    ],
)
def test_includes_outside_the_template_folders_are_refused(
    project: Path, statement: str, message: str
) -> None:
    path = project / "p.yaml"
    path.write_text(pipeline(statement), "utf-8")
    with pytest.raises(TemplateError) as info, time_limit():
        load_pipeline(path)
    assert str(info.value).startswith(f"{path}:{PROMPT_LINE}:")
    assert message in str(info.value)
    assert "secret" not in str(info.value).replace("secret.txt", "")


@pytest.mark.parametrize(
    "name", ["../../outside/secret.txt", "/etc/passwd", "link.j2", "folder/secret.txt", ".env"]
)
def test_an_include_named_at_run_time_is_refused_too(project: Path, name: str) -> None:
    path = project / "p.yaml"
    path.write_text(pipeline("{% include name %}"), "utf-8")
    p = load_pipeline(path, {"name": name})  # the name is only known when rendering
    with pytest.raises(TemplateError) as info, time_limit():
        render_prompt(p, p.sections[0], prompt_variables(p, p.sections[0], {}))
    assert str(info.value).startswith(f"{path}:{PROMPT_LINE}:")
    assert "secret" not in str(info.value).replace("secret.txt", "")
    assert "inside" not in str(info.value)


@pytest.mark.parametrize("name", ["../../outside/secret.txt", "/etc/passwd", "link.j2"])
def test_a_template_file_outside_is_refused(project: Path, name: str) -> None:
    path = project / "p.yaml"
    path.write_text(f"sections:\n  - id: a\n    template: {json.dumps(name)}\n", "utf-8")
    with pytest.raises(TemplateError, match="outside the template folders") as info:
        load_pipeline(path)
    assert str(info.value).startswith(f"{path}:3:15: sections[0].template: ")


def test_a_file_outside_is_not_even_read(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []

    def spy(file: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return open(file, *args, **kwargs)

    monkeypatch.setattr(jinja2.loaders, "open", spy, raising=False)
    path = project / "p.yaml"
    path.write_text(pipeline("{% include 'part.j2' %}{% include 'link.j2' %}"), "utf-8")
    with pytest.raises(TemplateError, match="resolves outside"):
        load_pipeline(path)
    assert [Path(f).name for f in opened] == ["part.j2"]


def test_templates_inside_the_folders_still_load(project: Path) -> None:
    path = project / "p.yaml"
    path.write_text(pipeline("{% include 'part.j2' %}!"), "utf-8")
    p = load_pipeline(path)
    assert (
        render_prompt(p, p.sections[0], prompt_variables(p, p.sections[0], {})) == "part about tea!"
    )


# -- names that become paths -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["..", ".", "../../etc", "a/b", "a\\b", "x\x00", " ", "a" * 201])
def test_a_pipeline_name_cannot_leave_the_output_folder(name: str) -> None:
    text = f"name: {json.dumps(name)}\nsections:\n  - {{id: a, prompt: hi}}\n"
    with pytest.raises(ConfigError, match="must be usable as a folder name") as info:
        load_pipeline_text(text, file="p.yaml")
    assert str(info.value).startswith("p.yaml:1:7: name: ")


@pytest.mark.parametrize("key", ["", "..", "../x", "a/b", "a\\b", ".hidden", "/etc/passwd"])
def test_a_section_file_cannot_leave_the_run_folder(tmp_path: Path, key: str) -> None:
    run = RunDir.create(tmp_path / "out", "p", "run-1")
    with pytest.raises(ConfigError, match="cannot name a file in the run directory"):
        run.section_path(key)
    with pytest.raises(ConfigError):
        run.write_section(key, "text")
    assert [p.name for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


def test_record_keys_name_folders_inside_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "records.csv"
    ids = ["..", "../..", "/", "./x", "a/../../b", "..\\..", "~", "$HOME", "NUL", "x" * 300]
    path.write_text("id\n" + "\n".join(ids) + "\n", "utf-8")
    batch = tmp_path / "out" / "p" / "batch-1"
    for record in read_records(path, "id"):
        folder = (batch / record.key).resolve()
        assert folder.parent == batch.resolve(), record.key
        assert not record.key.startswith(".") and len(record.key.encode()) <= 200


# -- --out at a file -------------------------------------------------------------------------

RUN_PIPELINE = "name: out-check\nsections:\n  - {id: a, prompt: '[a] hi'}\n"


@pytest.mark.parametrize("dry_run", [False, True])
def test_out_at_a_file_exits_2_before_a_model_loads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    dry_run: bool,
) -> None:
    opened = install(monkeypatch, FakeBackend())
    path = tmp_path / "p.yaml"
    path.write_text(RUN_PIPELINE, "utf-8")
    target = tmp_path / "taken.txt"
    target.write_text("keep me", "utf-8")
    for out, problem in [(target, "is a file, not a folder"), (target / "sub", "is a file, so")]:
        argv = ["run", str(path), "--out", str(out), *(["--dry-run"] if dry_run else [])]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"--out {out}: cannot write the run: " in err and problem in err
        assert "Traceback" not in err
    assert opened == []
    assert target.read_text("utf-8") == "keep me"


def test_batch_out_at_a_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(RUN_PIPELINE, "utf-8")
    records = tmp_path / "r.csv"
    records.write_text("topic\ntea\n", "utf-8")
    target = tmp_path / "taken.txt"
    target.write_text("keep me", "utf-8")
    assert main(["batch", str(path), "--inputs", str(records), "--out", str(target)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert target.read_text("utf-8") == "keep me"


def test_a_run_writes_only_under_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend())
    path = tmp_path / "p.yaml"
    path.write_text(RUN_PIPELINE, "utf-8")
    out = tmp_path / "out"
    before = set(tmp_path.rglob("*"))
    assert main(["run", str(path), "--out", str(out)]) == 0
    capsys.readouterr()
    made = set(tmp_path.rglob("*")) - before
    assert made and all(p == out or p.is_relative_to(out) for p in made)
    assert not any(p.is_symlink() for p in made)
    assert os.listdir(out) == ["out-check"]
