"""Bad input, fuzzed: the YAML loader, the pipeline spec, `--set` values and batch records.

Every input gives a result or a GenError whose message names the place (`FILE:LINE:COL:`,
the record's line, or the `--set` key): never another exception, never a hang (each example
runs under a time limit), never a blow-up (alias bombs and deep nesting are refused fast,
with little memory). A pipeline that loads can be written as JSON, as the manifest is.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gen.cli import main
from gen.errors import ConfigError, GenError
from gen.pipeline import (
    Pipeline,
    load_pipeline,
    load_pipeline_text,
    render_document,
    render_prompt,
    render_system,
    render_title,
)
from gen.pipeline.records import read_records
from gen.pipeline.run.batch import Batch
from gen.pipeline.spec import GENERATION_FIELDS, Section
from gen.pipeline.templates.render import COUNT_FIELDS, render_count
from gen.pipeline.templates.trial import trial_render
from gen.pipeline.templates.variables import SectionResult, prompt_variables
from gen.pipeline.yaml_loader import MAX_DEPTH, load_yaml
from tests.reliability import hangs, soak

T = TypeVar("T")
LIMIT_S = 20.0  # per example: a guard against a hang on a busy machine, not a timing check
FUZZ = settings(
    max_examples=soak.examples(100, 500),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # explain traces every line: slow
)
LOCATED = r"{file}:\d+:\d+: \S"


def time_limit(seconds: float = LIMIT_S) -> contextlib.AbstractContextManager[None]:
    return hangs.time_limit(seconds)


def outcome(fn: Callable[[], T], *, tried: bool = True) -> T | GenError:
    """`fn()`, or the GenError it raised; any other exception fails the test. Counted as an
    input tried in make soak's summary."""
    if tried:
        soak.record("inputs tried")
    with time_limit():
        try:
            return fn()
        except GenError as exc:
            return exc


def assert_located(exc: GenError, file: str) -> None:
    text = str(exc)
    assert re.match(LOCATED.format(file=re.escape(file)), text), text
    assert "Traceback" not in text


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# -- YAML documents shaped like pipelines, with random values in every field ----------------


class Raw(str):
    """YAML text written as it is: numbers and tags no Python value dumps to."""

    def __repr__(self) -> str:  # a 4400-digit number is shown by its start
        return f"Raw({str.__repr__(self[:20])}{'...' if len(self) > 20 else ''})"


def repeated(text: str, times: int) -> st.SearchStrategy[str]:
    """`text * times`, built when drawn (a failure report then shows the recipe)."""
    return st.just(text).map(lambda t: t * times)


RAW_TEXTS = [
    "1e400", "-1e400", "1.0e+400", ".inf", "-.inf", ".nan", "0xff", "-1", "0", "~",
    "2001-13-45", "2001-12-14", "*undefined", "190:20:30", "0o777", "[]", "{}", "'\\t'",
    '"\\ud800"', '"\\x00"', "!!binary aGk=", "!!python/object:os.system x", "!!set {a}",
    "&a [*a]", "!custom x",
]  # fmt: skip
RAW = st.sampled_from([Raw(t) for t in (*RAW_TEXTS, "9" * 4400, "0x" + "f" * 400)])
NUMBERS = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([0, -1, 1, 2, 2**31, 2**63, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
TEXT = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=30),
    st.sampled_from(["", " ", "auto", "kv", "list", "json", "none", "md", "\t", "茶 🍵", "\udcff"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT, RAW)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(TEXT | st.integers(), inner, max_size=4)
    ),
    max_leaves=8,
)
PROMPTS = st.sampled_from(
    [
        "Write about {{ topic }}.",
        "[{{ topic }}] {{ sections.a.text }}",
        "{% for x in sections.a.items %}{{ x }}{% endfor %}",
        "{{ item }} {{ loop_index }}",
        "{{ outline }}{{ previous }}",
        "{{ nope }}",
        "{% if %}",
        "{{ ''.__class__.__mro__ }}",
        "{% include '../../etc/passwd' %}",
        "{{ range(10**9) | length }}",
        "{{ 'a' * 10**10 }}",
        "{{ topic | attr('__cla' ~ 'ss__') }}",
    ]
)
IDS = st.sampled_from(["a", "b", "intro", "x_1", "", "1a", "a-b", "sections"])


def field_value(name: str) -> st.SearchStrategy[Any]:
    plausible: dict[str, st.SearchStrategy[Any]] = {
        "id": IDS,
        "prompt": PROMPTS,
        "title": PROMPTS,
        "system": PROMPTS,
        "template": st.sampled_from(["part.md.j2", "../x", "/etc/passwd", "nope.j2", ""]),
        "depends_on": st.lists(IDS, max_size=3),
        "context": st.lists(IDS | st.sampled_from(["previous", "all"]), max_size=3),
        "foreach": st.sampled_from(["sections.a.items", "inputs.kinds", "inputs.nope", "x"]),
        "parse": st.sampled_from(["text", "list", "json", "yaml"]),
        "format": st.sampled_from([{"regex": "[a-z]+"}, {"json_schema": "{"}, {}, "none"]),
    }
    if name in GENERATION_FIELDS or name.endswith(("_words", "_items")):
        plausible[name] = NUMBERS | RAW | st.sampled_from(["{{ n }}", "{{ nope }}"])
    return st.one_of(plausible.get(name, SCALARS), VALUES)


SECTION_KEYS = [*Section.model_fields, "unknown_key"]
SECTIONS = st.lists(
    st.fixed_dictionaries(
        {"id": field_value("id"), "prompt": field_value("prompt")},
        optional={k: field_value(k) for k in SECTION_KEYS if k not in ("id", "prompt")},
    )
    | VALUES,
    max_size=4,
)
TOP = st.fixed_dictionaries(
    {},
    optional={
        "name": TEXT | VALUES,
        "model": st.sampled_from(["openai:fake", "smollm2-135m", "/nope.gguf"]) | VALUES,
        "base_url": TEXT | VALUES,
        "remote": st.dictionaries(
            st.sampled_from(["timeout", "max_retries", "concurrency", "x"]), NUMBERS | RAW
        ),
        "defaults": st.dictionaries(
            st.sampled_from([*GENERATION_FIELDS, "x"]), field_value("max_tokens") | VALUES
        ),
        "context": st.dictionaries(
            st.sampled_from(["window", "reserve", "x"]), NUMBERS | RAW | st.just("auto")
        ),
        "inputs": st.dictionaries(TEXT | st.just("topic"), VALUES, max_size=4),
        "document": TEXT | st.dictionaries(st.sampled_from(["title", "inline", "x"]), PROMPTS),
        "sections": SECTIONS,
        "unknown": VALUES,
    },
)


def to_yaml(value: Any) -> str:
    """Flow-style YAML, with Raw text as it is."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{to_yaml(k)}: {to_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(to_yaml(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and value != value:
        return ".nan"
    if isinstance(value, float) and abs(value) == float("inf"):
        return ".inf" if value > 0 else "-.inf"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def pipeline_text(top: dict[str, Any]) -> str:
    """Block style at the top and for `sections:`, flow style inside."""
    lines = []
    for key, value in top.items():
        if key == "sections" and isinstance(value, list) and value:
            lines += ["sections:", *(f"  - {to_yaml(item)}" for item in value)]
        else:
            lines.append(f"{key}: {to_yaml(value)}")
    return "\n".join(lines) + "\n"


def check_loaded(pipeline: Pipeline) -> None:
    """What a run does with a loaded pipeline before a model answers: write its inputs and
    settings as JSON (the manifest), render every prompt, system prompt, title, count
    (lengths, max_items, min_items) and the document, and the trial render of `gen
    validate` and `gen run`; each renders or fails at a place."""
    blob = {
        "inputs": pipeline.inputs,
        "settings": [pipeline.settings_for(s).model_dump() for s in pipeline.sections],
    }
    json.dumps(blob, allow_nan=False, ensure_ascii=False).encode("utf-8")
    results = {s.id: SectionResult(s.id, "text", ["x", "y"], s.id) for s in pipeline.sections}
    renders: list[Callable[[], object]] = [
        lambda: render_document(pipeline, results),
        lambda: trial_render(pipeline),
    ]
    for section in pipeline.sections:
        variables = prompt_variables(pipeline, section, results, item="x")
        renders += [
            lambda s=section, v=variables: render_prompt(pipeline, s, v),
            lambda s=section, v=variables: render_system(pipeline, s, v),
            lambda s=section, v=variables: render_title(pipeline, s, v),
            *(
                lambda s=section, v=variables, f=field: render_count(pipeline, s, f, v)
                for field in COUNT_FIELDS
            ),
        ]
    for render in renders:
        result = outcome(render, tried=False)
        if isinstance(result, GenError):
            assert_located(result, pipeline.file)


@FUZZ
@given(TOP)
def test_pipelines_with_random_values_in_every_field(top: dict[str, Any]) -> None:
    result = outcome(lambda: load_pipeline_text(pipeline_text(top), file="p.yaml"))
    if isinstance(result, GenError):
        assert_located(result, "p.yaml")
    else:
        check_loaded(result)


VALID: dict[str, Any] = {
    "name": "fuzz",
    "model": "openai:fake",
    "defaults": {"max_tokens": 64, "temperature": 0.7, "seed": 1, "stop": ["END"]},
    "context": {"window": 4096, "reserve": 256},
    "inputs": {"topic": "tea", "n": 3, "kinds": ["green", "black"]},
    "sections": [
        {"id": "a", "prompt": "Outline {{ topic }}.", "parse": "list", "max_items": 3},
        {
            "id": "b",
            "foreach": "sections.a.items",
            "prompt": "{{ item }} ({{ loop_index }}/{{ loop_length }})",
            "target_words": 100,
            "context": ["a", "previous"],
        },
        {"id": "c", "prompt": "{{ sections.b.text }} {{ n }}", "depends_on": ["b"]},
    ],
    "document": {"title": "{{ topic }}", "inline": "{% for p in parts %}{{ p.text }}{% endfor %}"},
}
PLACES: list[tuple[Any, ...]] = [
    *((key,) for key in [*Pipeline.model_fields, "unknown"]),
    *(("defaults", key) for key in [*GENERATION_FIELDS, "unknown"]),
    *(("context", key) for key in ("window", "reserve", "unknown")),
    *(("remote", key) for key in ("timeout", "max_retries", "concurrency")),
    *(("document", key) for key in ("title", "inline", "template", "formats", "unknown")),
    *(("inputs", key) for key in ("topic", "n", "kinds", "new", "")),
    *(("sections", i, key) for i in range(3) for key in SECTION_KEYS),
]


def mutated(changes: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    """VALID with each (place, value) of `changes` set, where an earlier change left a
    mapping to set it in."""
    data = copy.deepcopy(VALID)
    for place, value in changes:
        node: Any = data
        for step in place[:-1]:
            if isinstance(node, dict):
                node = node.setdefault(step, {})
            elif isinstance(node, list) and isinstance(step, int) and step < len(node):
                node = node[step]
            else:
                node = None
        if isinstance(node, dict):
            node[place[-1]] = value
    return data


CHANGES = st.lists(
    st.sampled_from(PLACES).flatmap(
        lambda place: st.tuples(st.just(place), field_value(place[-1]))
    ),
    min_size=1,
    max_size=3,
)


def test_the_valid_pipeline_loads() -> None:
    check_loaded(load_pipeline_text(pipeline_text(VALID), file="p.yaml"))


@settings(FUZZ, max_examples=soak.examples(100, 1000))
@given(CHANGES)
def test_a_valid_pipeline_with_random_values_in_a_few_fields(
    changes: list[tuple[tuple[Any, ...], Any]],
) -> None:
    result = outcome(lambda: load_pipeline_text(pipeline_text(mutated(changes)), file="p.yaml"))
    if isinstance(result, GenError):
        assert_located(result, "p.yaml")
    else:
        check_loaded(result)


YAMLISH = st.text(
    alphabet=st.sampled_from([*":-[]{}&*!|>'\"#%@`,? \n\t\\", "a", "1", "é", "\x00"]),
    max_size=60,
)


@settings(FUZZ, max_examples=soak.examples(100, 3000))
@given(st.one_of(st.text(max_size=200), YAMLISH))
def test_arbitrary_text(text: str) -> None:
    result = outcome(lambda: load_pipeline_text(text, file="p.yaml"))
    if isinstance(result, GenError):
        assert_located(result, "p.yaml")


@settings(FUZZ, max_examples=soak.examples(100, 2000))
@given(st.binary(max_size=200) | st.builds(lambda b: b"sections:\n  - " + b, st.binary()))
def test_arbitrary_bytes_through_a_file(folder: Path, data: bytes) -> None:
    path = folder / "bytes.yaml"
    path.write_bytes(data)
    result = outcome(lambda: load_pipeline(path))
    if isinstance(result, GenError):
        assert_located(result, str(path))


# -- the cases a fuzzer finds rarely, each on purpose -----------------------------------------

BASE = "sections:\n  - {id: a, prompt: hi}\n"
BILLION_LAUGHS = "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n"
    for i in range(10)
)
MERGE_BOMB = "".join(
    f"m{i}: &m{i}\n  <<: [*m{i - 1}]\n  k{i}: [{', '.join([f'*m{i - 1}'] * 9)}]\n"
    if i
    else "m0: &m0 {k: v}\n"
    for i in range(10)
)
ALIAS_CHAIN = "c0: &c0 [x]\n" + "".join(f"c{i}: &c{i} [*c{i - 1}]\n" for i in range(1, 300))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the pipeline is empty"),
        ("   \n\n# only a comment\n", "the pipeline is empty"),
        ("\ufeff", "the pipeline is empty"),
        ("x: " + "[" * 10_000 + "]" * 10_000 + "\n" + BASE, f"nested more than {MAX_DEPTH}"),
        ("x: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n" + BASE, "nested more than"),
        ("- " * 10_000 + "x\n", "nested more than"),
        (ALIAS_CHAIN + BASE, "nested more than"),
        (BILLION_LAUGHS + BASE, "expand this value past"),
        (MERGE_BOMB + BASE, "expand this value past"),
        ("a: &a [*a]\n" + BASE, "recursive YAML alias"),
        (BASE + "sections: []\n", "duplicate key 'sections'"),
        ("sections:\n\t- {id: a, prompt: hi}\n", "does not allow tabs"),
        (BASE + "defaults: {max_tokens: " + "9" * 5000 + "}\n", "too many digits"),
        (BASE + "defaults: {max_tokens: 1e400}\n", "must be an integer"),
        (BASE + "defaults: {temperature: 1.0e+400}\n", "not allowed: give a finite number"),
        (BASE + "defaults: {temperature: .inf}\n", "not allowed: give a finite number"),
        (BASE + "remote: {timeout: .nan}\n", "not allowed: give a finite number"),
        (BASE + "defaults: {max_tokens: -1}\n", "must be > 0, got -1"),
        (BASE + "context: {window: 0}\n", "must be 'auto' or an integer > 0"),
        (BASE + "context: {window: 10, reserve: 10}\n", "must be less than context.window"),
        (BASE + 'inputs: {t: "\\ud800"}\n', "lone surrogate"),
        (BASE + "inputs: {t: !!binary aGk=}\n", "unsupported YAML tag"),
        (BASE + "inputs: {t: !!python/name:os.system x}\n", "unsupported YAML tag"),
        (BASE + "inputs: {.nan: 1}\n", "not allowed: give a finite number"),
        (BASE + "inputs: {[a]: 1}\n", "mapping keys must be plain scalars"),
        (BASE + "name: ../../etc\n", "must be usable as a folder name"),
        (BASE + "name: ..\n", "must be usable as a folder name"),
        ("sections:\n  - {id: a, prompt: hi, target_words: '1e999'}\n", "must be a number > 0"),
    ],
)
def test_hostile_documents_are_refused_fast(text: str, message: str) -> None:
    start = time.monotonic()
    result = outcome(lambda: load_pipeline_text(text, file="p.yaml"))
    assert time.monotonic() - start < 5
    assert isinstance(result, ConfigError), result
    assert_located(result, "p.yaml")
    assert message in str(result)


@pytest.mark.parametrize("text", [BILLION_LAUGHS, MERGE_BOMB, ALIAS_CHAIN])
def test_alias_bombs_are_refused_in_little_memory(text: str) -> None:
    assert peak_memory(lambda: outcome(lambda: load_pipeline_text(text + BASE))) < 16 * 2**20


def test_a_pipeline_past_4_mib_is_refused_before_parsing() -> None:
    text = BASE + "inputs: {long: " + "x" * 5_000_000 + "}\n"
    start = time.monotonic()
    error = outcome(lambda: load_pipeline_text(text, file="p.yaml"))
    assert time.monotonic() - start < 2
    assert isinstance(error, ConfigError)
    assert str(error).startswith("p.yaml:1:1: longer than 4 MiB, more YAML than gen reads")
    assert len(str(error)) < 1000


def peak_memory(fn: Callable[[], object]) -> int:
    """The most memory Python objects held while `fn` ran (tracemalloc: slow, so untimed)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_dates_and_huge_integers_load_as_json_values() -> None:
    text = BASE + "inputs: {day: 2001-12-14, big: " + "9" * 400 + ", hex: 0x" + "f" * 100 + "}\n"
    pipeline = load_pipeline_text(text, file="p.yaml")
    assert pipeline.inputs["day"] == "2001-12-14"  # the text, not a date JSON cannot hold
    assert pipeline.inputs["big"] == 10**400 - 1
    check_loaded(pipeline)
    with pytest.raises(ConfigError) as info:  # no window holds it: said at its place
        load_pipeline_text(BASE + f"defaults: {{max_tokens: {10**400}}}\n", file="p.yaml")
    assert str(info.value).startswith(
        "p.yaml:3:24: defaults.max_tokens: must be at most 2,147,483,647 (2**31 - 1), "
        "got a number of 401 digits: "
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/dev/zero", "longer than 4 MiB, more YAML than gen reads"),
        ("/", "cannot read pipeline: Is a directory"),
        ("/no/such/pipeline.yaml", "pipeline file not found"),
    ],
)
def test_paths_that_are_no_pipeline_file(path: str, message: str) -> None:
    error = outcome(lambda: load_pipeline(path))
    assert isinstance(error, ConfigError)
    assert re.match(rf"{re.escape(path)}:(1:1:)? {re.escape(message)}", str(error)), str(error)


def test_invalid_utf8_names_its_line_and_column(folder: Path) -> None:
    path = folder / "latin1.yaml"
    path.write_bytes(b"sections:\n  - {id: a, prompt: caf\xe9}\n")
    error = outcome(lambda: load_pipeline(path))
    assert isinstance(error, ConfigError)
    assert str(error).startswith(f"{path}:2:24: invalid UTF-8 (byte 0xe9)")


# -- --set NAME=VALUE, defaults.KEY=VALUE, sections.ID.KEY=VALUE ------------------------------

SET_BASE = """\
model: openai:fake
inputs: {topic: tea, n: 3, ratio: 0.5, flag: true, kinds: [a, b], meta: {k: v}, none: null}
sections:
  - {id: a, prompt: "{{ topic }} {{ n }} {{ ratio }} {{ flag }} {{ kinds }} {{ meta }}"}
  - {id: b, foreach: inputs.kinds, prompt: "{{ item }}", target_words: 100}
"""
SET_KEYS = st.one_of(
    st.sampled_from(["topic", "n", "ratio", "flag", "kinds", "meta", "none", "nope", ""]),
    st.sampled_from([f"defaults.{f}" for f in GENERATION_FIELDS] + ["defaults.x", "defaults."]),
    st.sampled_from(
        [f"sections.{i}.{f}" for i in ("a", "b", "zz", "") for f in ("max_tokens", "seed")]
    ),
    st.sampled_from(["sections.b.target_words", "sections.a.prompt", "x.y", "../x", "a/b"]),
    TEXT,
)
SET_VALUES = st.one_of(
    TEXT,
    RAW.map(str),
    repeated("[", 300) | repeated("{a: ", 300) | repeated("10", 3000),
    st.sampled_from(["inf", "nan", "-1", "{{ n }}"]),
    st.sampled_from(["{{ nope }}", "{{ ''.__class__ }}", "[1, 2]", "{a: 1}"]),
    st.just("bomb").map(lambda _: BILLION_LAUGHS),
)


def set_error_is_named(exc: GenError, file: str) -> None:
    text = str(exc)
    located = re.match(LOCATED.format(file=re.escape(file)), text)
    assert located or text.startswith("--set "), text


@settings(FUZZ, max_examples=soak.examples(100, 1500))
@given(st.dictionaries(SET_KEYS, SET_VALUES, max_size=3))
def test_set_values(overrides: dict[str, str]) -> None:
    result = outcome(lambda: load_pipeline_text(SET_BASE, file="p.yaml", overrides=overrides))
    if isinstance(result, GenError):
        set_error_is_named(result, "p.yaml")
    else:
        check_loaded(result)


@settings(FUZZ, max_examples=soak.examples(25, 125))
@given(st.lists(st.tuples(SET_KEYS, SET_VALUES), max_size=3))
def test_set_through_the_cli(folder: Path, pairs: list[tuple[str, str]]) -> None:
    path = folder / "set.yaml"
    path.write_text(SET_BASE, encoding="utf-8")
    argv = ["validate", str(path), *(f"--set={key}={value}" for key, value in pairs)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit():
        code = main(argv)
    assert code in (0, 2), err.getvalue()
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().strip(), "a refusal says why"


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("topic=\udcff", "not valid UTF-8"),  # argv carries the byte 0xff so
        ("\udcff=x", "not valid UTF-8"),
        ("ratio=inf", "must be a finite number"),
        ("ratio=nan", "must be a finite number"),
        ("n=" + "9" * 5000, "must be an integer"),
        ("kinds=" + "[" * 5000 + "]" * 5000, "nested more than"),
        ("meta=" + BILLION_LAUGHS.replace("\n", ", ").join("{}"), "must be a mapping"),
        ("defaults.max_tokens=" + "9" * 5000, "must be an integer"),
        ("defaults.temperature=.inf", "must be a number"),
        ("defaults.seed=2001-13-45", "must be an integer"),
        ("defaults.max_tokens=-5", "must be > 0, got -5"),
        ("sections.zz.seed=1", "unknown section id 'zz'"),
        ("topic", "--set expects KEY=VALUE"),
    ],
)
def test_hostile_set_values_exit_2_with_the_reason(
    folder: Path, capsys: pytest.CaptureFixture[str], pair: str, message: str
) -> None:
    path = folder / "set.yaml"
    path.write_text(SET_BASE, encoding="utf-8")
    with time_limit():
        code = main(["validate", str(path), "--set", pair])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err) < 2000  # a 5000-digit value is not echoed whole


# -- batch records: CSV, JSONL, YAML ----------------------------------------------------------

RECORD_PIPELINE = """\
model: openai:fake
inputs: {topic: tea, n: 3}
sections:
  - {id: a, prompt: "{{ topic }} {{ n }}"}
"""
CELLS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["..", "../../etc", "/", ".hidden", "a/b", "", '"', "\x00", "茶"]),
)
CSV_TEXT = st.lists(st.lists(CELLS, max_size=4), max_size=5).map(
    lambda rows: "\n".join(",".join(row) for row in rows)
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(CELLS, inner, max_size=3),
    max_leaves=6,
)
JSONL_LINE = st.one_of(
    st.dictionaries(
        st.sampled_from(["topic", "n", "id", "../x", "a/b", "defaults.seed"]), JSON_VALUES
    ).map(lambda v: json.dumps(v, ensure_ascii=False)),
    JSON_VALUES.map(json.dumps),
    st.sampled_from(["{", "NaN", '{"topic": NaN}', '{"topic": "\\ud800"}', "", "\u2028"]),
    repeated("[", 5000),
    repeated("1", 5000),
)


def as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate: bytes that are not UTF-8


RECORD_FILES = st.one_of(
    st.tuples(st.just(".csv"), CSV_TEXT.map(str.encode)),
    st.tuples(st.just(".jsonl"), st.lists(JSONL_LINE, max_size=5).map("\n".join).map(str.encode)),
    st.tuples(st.just(".yaml"), st.lists(VALUES, max_size=4).map(to_yaml).map(as_bytes)),
    st.tuples(st.sampled_from([".csv", ".jsonl", ".yaml"]), st.binary(max_size=60)),
)
KEY = re.compile(r"[^\W_][\w-]*", re.UNICODE)


def check_records(path: Path, key_field: str | None) -> None:
    file = str(path)
    records = outcome(lambda: read_records(path, key_field))
    if isinstance(records, GenError):
        assert re.match(rf"{re.escape(file)}(:\d+)*: \S", str(records)), str(records)
        return
    keys = [r.key for r in records]
    assert len(set(keys)) == len(keys)
    for record in records:
        assert KEY.fullmatch(record.key) and len(record.key.encode()) <= 255, record.key
        json.dumps(record.fields, allow_nan=False).encode("utf-8")
    pipeline = path.parent / "records-pipeline.yaml"
    pipeline.write_text(RECORD_PIPELINE, encoding="utf-8")
    batch = Batch(pipeline, records, file, path.parent / "out", model="openai:fake")
    with time_limit():
        problems = batch.check()
    for record in records:
        if record.key in problems:
            assert problems[record.key].startswith(f"{file}:{record.line}: "), problems


@settings(FUZZ, max_examples=soak.examples(100, 1000))
@given(RECORD_FILES, st.sampled_from([None, "topic", "id"]))
def test_record_files(folder: Path, kind: tuple[str, bytes], key_field: str | None) -> None:
    suffix, data = kind
    path = folder / f"records{suffix}"
    path.write_bytes(data)
    check_records(path, key_field)


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("bad.csv", b"topic\nt\xffa\n", ":2:2: invalid UTF-8 (byte 0xff)"),
        ("bad.jsonl", b'{"topic": "\xc3"}\n', ":1:12: invalid UTF-8 (byte 0xc3)"),
        ("empty.csv", b"", ": there are no records in it"),
        ("empty.jsonl", b"\n\n", ": there are no records in it"),
        ("header.csv", b"topic,n\n", ": there are no records in it"),
        ("dup.csv", b"topic,topic\na,b\n", ":1: columns 1 and 2 are both 'topic'"),
        ("huge.csv", b"topic\nok\n" + b"x" * 200_000 + b"\n", ":3: a cell is longer than"),
        ("deep.yaml", b"- " + b"[" * 10_000 + b"]" * 10_000, ":1:102: lists and mappings nested"),
    ],
)
def test_record_files_refused_whole(folder: Path, name: str, data: bytes, expected: str) -> None:
    path = folder / name
    path.write_bytes(data)
    error = outcome(lambda: read_records(path))
    assert isinstance(error, ConfigError)
    assert str(error).startswith(str(path) + expected), str(error)


def test_bad_records_fail_alone_and_name_their_line(folder: Path) -> None:
    lines = [
        '{"topic": "tea"}',
        "[1, 2]",
        '{"topic": NaN}',
        '{"topic": "\\ud800"}',
        "[" * 100_000 + "]" * 100_000,
        '{"topic": ' + "1" * 5000 + "}",
        '{"topic": "' + "x" * 10_000_000 + '"}',  # a 10 MB line: a record, too long to render
        '{"../x": 1}',
        '{"a/b": 1}',
        '{"topic": {"nested": [1, {"deep": null}]}}',
        '{"n": "many"}',
    ]
    path = folder / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = read_records(path)
    assert [r.error is None for r in records] == [
        True, False, False, False, False, False, True, True, True, True, True,
    ]  # fmt: skip
    pipeline = folder / "mixed-pipeline.yaml"
    pipeline.write_text(RECORD_PIPELINE, encoding="utf-8")
    with time_limit():
        problems = Batch(pipeline, records, str(path), folder / "o", model="openai:fake").check()
    assert sorted(problems) == [
        "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0011",
    ]  # fmt: skip
    for record in records:
        if record.key in problems:
            assert problems[record.key].startswith(f"{path}:{record.line}: ")
    assert "a number has too many digits" in problems["0006"]
    assert (
        "sections[0].prompt: blocked by the template sandbox: the output would be "
        in (problems["0007"])
    )  # the run would refuse it when it renders the prompt: refused before the model
    assert "unknown setting" in problems["0008"]
    assert "unknown input" in problems["0009"]


def test_a_device_is_no_records_file(folder: Path) -> None:
    path = folder / "zero.csv"
    path.symlink_to("/dev/zero")
    error = outcome(lambda: read_records(path))
    assert isinstance(error, ConfigError)
    assert str(error) == f"{path}: the records must be a file, not a device"


def test_jsonl_lines_end_at_newlines_only(folder: Path) -> None:
    path = folder / "separators.jsonl"
    path.write_text('{"topic": "a\u2028b\x85c"}\r\n{"topic": "d"}\n', encoding="utf-8")
    records = read_records(path)
    assert [r.fields for r in records] == [{"topic": "a\u2028b\x85c"}, {"topic": "d"}]


def test_record_keys_cannot_leave_the_batch_folder(folder: Path) -> None:
    ids = ["..", "../../etc", "/etc/passwd", ".hidden", "a/../b", "\\x", "\U00020000" * 100, "."]
    path = folder / "keys.jsonl"
    path.write_text("\n".join(json.dumps({"id": i}) for i in ids) + "\n", encoding="utf-8")
    keys = [r.key for r in read_records(path, "id")]
    assert keys[:6] == ["0001", "etc", "etc-passwd", "hidden", "a-b", "x"]
    assert len(keys[6].encode()) <= 200 and keys[7] == "0008"
    for key in keys:
        assert KEY.fullmatch(key)
        assert (folder / key).resolve().parent == folder.resolve()


def test_yaml_records_keep_dates_as_text(folder: Path) -> None:
    path = folder / "dates.yaml"
    path.write_text("- {topic: 2001-12-14, n: 3}\n", encoding="utf-8")
    (record,) = read_records(path)
    assert record.fields == {"topic": "2001-12-14", "n": 3}


def test_loader_alone_refuses_a_bomb_inside_a_set_value() -> None:
    with pytest.raises(ConfigError, match="expand this value past"):
        load_yaml(BILLION_LAUGHS, "--set")
