"""`gen validate` and `gen run` as users call them: exit codes, what goes to stdout and
stderr, --set, --events, --stream, --resume; `gen run` uses a scripted backend here."""

from __future__ import annotations

import errno
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gen.cli import main
from gen.cli.pipeline import STDOUT_CLASH
from gen.cli.stream import DocumentStream
from gen.errors import BackendError
from gen.pipeline.run.rundir import RunDir
from tests.pipeline.fake_backend import FakeBackend, Reply, install, pipeline_from

ROOT = Path(__file__).resolve().parents[1]
GEN = Path(sys.executable).parent / "gen"
BROKEN = ROOT / "tests" / "pipeline" / "broken"

PIPELINE = """\
name: cli
inputs:
  topic: tea
defaults:
  max_tokens: 20
  max_rounds: 2
sections:
  - id: intro
    prompt: "[intro] Introduce {{ topic }}."
  - id: body
    prompt: "[body] Explain {{ topic }}."
"""


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "cli.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    return path


def gen_run(
    capsys: pytest.CaptureFixture[str], path: Path, *args: str, out: Path | None = None
) -> tuple[int, list[str], str]:
    """`gen run PATH --out OUT ARGS...` -> (exit code, stdout lines, stderr)."""
    out = out or path.parent / "out"
    code = main(["run", str(path), "--out", str(out), *args])
    stdout, stderr = capsys.readouterr()
    return code, stdout.splitlines(), stderr


# -- gen validate ---------------------------------------------------------------------------


def test_validate_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "pipelines" / "quickstart.yaml")]) == 0
    out, err = capsys.readouterr()
    first, note = out.splitlines()
    assert first.endswith("ok (3 sections, model smollm2-135m)")
    assert note.startswith("  steps: context [previous]: previous added as a labelled block")
    assert err == ""


def test_validate_broken_pipeline_exit_2_located_no_traceback() -> None:
    path = BROKEN / "wrong_type.yaml"  # "# expect: 3:15 defaults.max_tokens: ..."
    proc = subprocess.run(
        [str(GEN), "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"{path}:3:15: defaults.max_tokens: must be an integer")
    assert "3 |   max_tokens: lots" in proc.stderr
    assert "Traceback" not in proc.stderr and "pydantic" not in proc.stderr


def test_validate_unknown_set_key_exit_2(
    pipeline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(pipeline), "--set", "topik=coffee"]) == 2
    err = capsys.readouterr().err
    assert f"{pipeline}:2:1: --set topik: unknown input; did you mean 'topic'?" in err


def test_run_broken_pipeline_exit_2_before_loading_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened = install(monkeypatch, FakeBackend())
    code, out, err = gen_run(capsys, BROKEN / "unknown_top_key.yaml", out=tmp_path)
    assert code == 2 and out == []
    assert f"{BROKEN / 'unknown_top_key.yaml'}:3:1: " in err
    assert opened == []


# -- gen run --------------------------------------------------------------------------------


def test_run_prints_the_document_path_last(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = FakeBackend({"intro": [("Tea is a drink.", "stop")]})
    opened = install(monkeypatch, backend)
    code, out, err = gen_run(capsys, pipeline)
    assert code == 0
    document = Path(out[-1])
    assert document.name == "document.md" and document.is_file()
    assert document.parent.parent == pipeline.parent / "out" / "cli"
    text = document.read_text("utf-8")
    assert "Tea is a drink." in text and "Text of body." in text
    assert opened == [("smollm2-135m", None, None)]
    assert backend.closed  # the backend is shut down at the end
    # progress goes to stderr
    assert "intro" in err and "completed" in err


def test_run_model_option(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened = install(monkeypatch, FakeBackend())
    code, out, _ = gen_run(capsys, pipeline, "--model", "openai:gpt-x")
    assert code == 0
    assert opened[0][0] == "openai:gpt-x"
    manifest = json.loads((Path(out[-1]).parent / "manifest.json").read_text("utf-8"))
    assert manifest["model"] == "openai:gpt-x"


def test_run_set_overrides_an_input(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = FakeBackend()
    install(monkeypatch, backend)
    code, out, _ = gen_run(capsys, pipeline, "--set", "topic=green coffee")
    assert code == 0
    prompts = {c.key: c.messages[-1]["content"] for c in backend.calls}
    assert prompts == {
        "intro": "[intro] Introduce green coffee.",
        "body": "[body] Explain green coffee.",
    }
    manifest = json.loads((Path(out[-1]).parent / "manifest.json").read_text("utf-8"))
    assert manifest["inputs"] == {"topic": "green coffee"}


def test_run_events_to_stdout_carries_only_json_lines(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"intro": [("茶 🍵 ", "length"), ("ชาไทย.", "stop")]}))
    code, out, err = gen_run(capsys, pipeline, "--events", "-")
    assert code == 0
    events = [json.loads(line) for line in out]  # `| jq -c .type` reads every line
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert len({e["run_id"] for e in events}) == 1
    document = Path(events[-1]["document"])
    assert document.name == "document.md" and document.is_file()
    assert "茶 🍵 ชาไทย." in document.read_text("utf-8")
    assert err.splitlines()[-1] == str(document)  # the path still reaches a person
    assert "".join(
        e["text"] for e in events if e["type"] == "delta" and e["section"] == "intro"
    ) == ("茶 🍵 ชาไทย.")
    on_disk = (document.parent / "events.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in on_disk] == events


def test_run_stream_with_events_to_stdout_is_refused_before_loading(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened = install(monkeypatch, FakeBackend())
    code, out, err = gen_run(capsys, pipeline, "--stream", "--events", "-")
    assert code == 2 and out == []
    assert err == f"error: {STDOUT_CLASH}\n"
    assert opened == []
    assert not (pipeline.parent / "out").exists()
    # either one alone, or --stream with events in a file, is fine
    code, out, _ = gen_run(capsys, pipeline, "--stream", "--events", str(pipeline.parent / "e"))
    assert code == 0 and opened


def test_run_disk_full_during_the_run_exit_1_no_traceback(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend())

    def full(self: RunDir, manifest: dict[str, Any]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.manifest_path))

    monkeypatch.setattr(RunDir, "write_manifest", full)
    code, out, err = gen_run(capsys, pipeline)
    assert code == 1 and out == []
    assert err.splitlines()[-1].startswith("error: cannot write the run: No space left on device: ")
    assert err.splitlines()[-1].endswith("manifest.json")
    assert "Traceback" not in err and "Errno" not in err


# Hidden sections (an outline with parse: list, one marked hidden), a fan-out over the
# outline, sections running side by side, a titled document, multi-round text with
# whitespace the document template trims, and Chinese, emoji and Thai cut into 4-character
# deltas.
STREAMED = """\
name: streamed
document:
  title: "{{ topic }}：一份指南 🍵"
inputs:
  topic: 茶
defaults: {max_tokens: 400, max_rounds: 3}
sections:
  - id: outline
    prompt: "[outline] 列出两部分。"
    parse: list
  - id: intro
    title: 引言 🌏
    prompt: "[intro] 介绍{{ topic }}。"
  - id: part
    foreach: sections.outline.items
    prompt: "[part-{{ loop_index }}] 写{{ item }}。"
  - id: notes
    hidden: true
    prompt: "[notes] 笔记。"
  - id: ending
    prompt: "[ending] 结尾：{{ sections.notes.text }}"
"""
STREAMED_SCRIPTS: dict[str, list[Reply]] = {
    "outline": [("1. 茶叶 🌿\n2. ชาไทย\n", "stop")],
    "intro": [("\n\n  茶是一种饮料 🍵，", "length"), ("它来自中国。\n\n", "stop")],
    "part-1": [("第一部分：茶叶 🌿 很香。\n\n- 绿茶\n- 红茶", "stop")],
    "part-2": [("ชาไทยหวานมาก 🧋 อร่อย", "stop")],
    "notes": [("只给结尾看的笔记。", "stop")],
}


def test_run_stream_writes_the_document_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = tmp_path / "streamed.yaml"
    path.write_text(STREAMED, encoding="utf-8")
    install(monkeypatch, FakeBackend(dict(STREAMED_SCRIPTS)))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--stream"])
    stdout, stderr = capfdbinary.readouterr()
    assert code == 0
    document = Path(stderr.decode("utf-8").splitlines()[-1])  # the path goes to stderr
    assert document.name == "document.md"
    assert stdout == document.read_bytes()
    text = stdout.decode("utf-8")
    assert text.startswith("# 茶：一份指南 🍵\n\n## 引言 🌏\n\n茶是一种饮料 🍵，它来自中国。\n")
    assert "## 茶叶 🌿" in text and "ชาไทยหวานมาก 🧋 อร่อย" in text
    assert "1. 茶叶" not in text and "只给结尾看的笔记" not in text  # hidden sections
    assert text.index("## 茶叶") < text.index("## ชาไทย") < text.index("## Ending")


def test_run_stream_on_resume_writes_cached_sections_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = tmp_path / "streamed.yaml"
    path.write_text(STREAMED, encoding="utf-8")
    out = tmp_path / "out"
    failing = {**STREAMED_SCRIPTS, "ending": [BackendError("服务器走了")]}
    install(monkeypatch, FakeBackend(failing))
    assert main(["run", str(path), "--out", str(out), "--stream"]) == 1
    capfdbinary.readouterr()

    backend = FakeBackend({"ending": [("结束了 👋", "stop")]})
    install(monkeypatch, backend)
    code = main(["run", str(path), "--out", str(out), "--stream", "--resume"])
    stdout, stderr = capfdbinary.readouterr()
    assert code == 0
    assert backend.call_keys() == ["ending"]  # everything else is cached
    document = Path(stderr.decode("utf-8").splitlines()[-1])
    assert stdout == document.read_bytes()
    assert "茶是一种饮料 🍵，它来自中国。" in stdout.decode("utf-8")


def test_run_stream_with_a_custom_document_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    custom = STREAMED.replace(
        'document:\n  title: "{{ topic }}：一份指南 🍵"\n',
        'document:\n  inline: "{% for p in parts %}<{{ p.text }}>{% endfor %}"\n',
    )
    path = tmp_path / "custom.yaml"
    path.write_text(custom, encoding="utf-8")
    install(monkeypatch, FakeBackend(dict(STREAMED_SCRIPTS)))
    code, out, err = gen_run(capsys, path, "--stream")
    assert code == 0
    parts = [
        "茶是一种饮料 🍵，它来自中国。",
        "第一部分：茶叶 🌿 很香。\n\n- 绿茶\n- 红茶",
        "ชาไทยหวานมาก 🧋 อร่อย",
        "Text of ending.",
    ]
    assert "\n".join(out) + "\n" == "\n\n".join(parts) + "\n"  # the text, no path line
    document = next(Path(w) for w in err.split() if w.endswith("document.md"))
    assert "is at" in err.splitlines()[-1]
    assert document.read_text("utf-8").endswith("><Text of ending.>")  # the template's layout


def test_document_stream_writes_as_deltas_arrive_and_holds_later_parts() -> None:
    pipeline = pipeline_from(STREAMED)
    out = io.StringIO()
    stream = DocumentStream(pipeline, lambda key: None, out)
    stream({"type": "run_started"})
    stream({"type": "section_started", "section": "outline", "title": "Outline"})
    stream({"type": "section_started", "section": "intro", "title": "引言"})
    stream({"type": "delta", "section": "intro", "text": "\n 茶是"})
    assert out.getvalue() == "# 茶：一份指南 🍵\n\n## 引言\n\n茶是"
    stream({"type": "delta", "section": "intro", "text": "饮料。 \n"})
    assert out.getvalue().endswith("茶是饮料。")  # trailing whitespace waits for more text
    stream({"type": "delta", "section": "outline", "text": "1. 甲\n2. 乙"})
    stream({"type": "section_finished", "section": "outline", "items": ["甲", "乙"]})
    stream({"type": "section_started", "section": "part-2", "title": "乙"})
    stream({"type": "delta", "section": "part-2", "text": "乙的文字"})
    assert "乙" not in out.getvalue()  # held: part-1 and intro come first
    stream({"type": "section_finished", "section": "intro", "items": []})
    stream({"type": "section_started", "section": "part-1", "title": "甲"})
    stream({"type": "section_finished", "section": "part-1", "items": []})
    assert out.getvalue().endswith("茶是饮料。\n\n## 甲\n\n\n\n## 乙\n\n乙的文字")


def test_run_failed_exit_1_and_resume(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"body": [BackendError("server went away")]}))
    code, out, err = gen_run(capsys, pipeline)
    assert code == 1
    run_dir = Path(out[-1])
    assert (run_dir / "manifest.json").is_file()
    assert "--resume" in err and "server went away" in err
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "failed"
    intro = (run_dir / "sections" / "intro.md").read_bytes()

    backend = FakeBackend()
    install(monkeypatch, backend)
    code, out, err = gen_run(capsys, pipeline, "--resume")
    assert code == 0
    assert Path(out[-1]) == run_dir / "document.md"
    assert backend.call_keys() == ["body"]
    assert (run_dir / "sections" / "intro.md").read_bytes() == intro
    assert "(cached)" in err


# -- the template sandbox at run time -------------------------------------------------------

SANDBOX = """\
inputs:
  topic: tea
  name: "__class__"
  page: part.j2
sections:
  - id: a
    prompt: "[a] {{{{ {expr} }}}}"
"""


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("topic | attr(name)", "blocked by the template sandbox"),  # only seen at run time
        ("''.__class__.__mro__", "blocked by the template sandbox"),
        ("topic", None),
    ],
)
def test_run_time_sandbox_violation_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    expr: str,
    message: str | None,
) -> None:
    path = tmp_path / "sb.yaml"
    path.write_text(SANDBOX.format(expr=expr), encoding="utf-8")
    backend = FakeBackend()
    install(monkeypatch, backend)
    code, _, err = gen_run(capsys, path)
    if message is None:  # the control: the same pipeline without a violation runs
        assert code == 0
        return
    assert code == 2
    assert f"{path}:7:" in err and message in err
    assert "Traceback" not in err
    assert backend.calls == []


def test_run_time_include_outside_the_template_folders_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "part.j2").write_text("Write about {{ topic }}.", "utf-8")
    path = tmp_path / "inc.yaml"
    path.write_text(SANDBOX.replace("{{{{ {expr} }}}}", "{% include page %}"), encoding="utf-8")
    backend = FakeBackend()
    install(monkeypatch, backend)
    assert gen_run(capsys, path)[0] == 0  # the include works inside the folders
    assert backend.calls[0].messages[-1]["content"] == "[a] Write about tea."

    backend = FakeBackend()
    install(monkeypatch, backend)
    code, _, err = gen_run(capsys, path, "--set", "page=../../../../etc/passwd")
    assert code == 2
    assert f"{path}:7:" in err and "points outside the template folders" in err
    assert "root:" not in err
    assert backend.calls == []


def test_sandbox_violation_in_a_later_section_is_refused_before_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # b reads a's text, but the blocked name comes from an input: the trial render, with a
    # placeholder for a's text, meets it before any model loads
    path = tmp_path / "late.yaml"
    path.write_text(
        SANDBOX.format(expr="topic")
        + '  - id: b\n    prompt: "[b] {{ sections.a.text | attr(name) }}"\n',
        encoding="utf-8",
    )
    opened = install(monkeypatch, FakeBackend())
    code, out, err = gen_run(capsys, path)
    assert code == 2 and out == [] and opened == []
    assert err.startswith(f"{path}:9:") and "blocked by the template sandbox" in err


def test_sandbox_violation_in_a_later_section_fails_that_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the blocked name is the text a writes: only the run can meet it
    path = tmp_path / "late.yaml"
    path.write_text(
        SANDBOX.format(expr="topic")
        + '  - id: b\n    prompt: "[b] {{ sections.a.text | attr(sections.a.text) }}"\n',
        encoding="utf-8",
    )
    backend = FakeBackend({"a": [("__class__", "stop")]})
    install(monkeypatch, backend)
    code, out, _ = gen_run(capsys, path)
    assert code == 1
    manifest = json.loads((Path(out[-1]) / "manifest.json").read_text("utf-8"))
    b = {s["id"]: s for s in manifest["sections"]}["b"]
    assert b["status"] == "failed" and "blocked by the template sandbox" in b["error"]
    assert backend.call_keys() == ["a"]


# -- run metrics ----------------------------------------------------------------------------


def test_continuation_success_rate_is_null_when_nothing_needed_continuing(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = {"intro": [BackendError("断线 📡")], "body": [BackendError("断线 📡")]}
    install(monkeypatch, FakeBackend(failing))
    code, out, _ = gen_run(capsys, pipeline)
    assert code == 1
    metrics = json.loads((Path(out[-1]) / "manifest.json").read_text("utf-8"))["metrics"]
    assert metrics["sections_completed"] == 0
    assert metrics["continuation_success_rate"] is None  # not 1.0: nothing succeeded


def test_continuation_success_rate_counts_a_continuation_that_failed(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripts: dict[str, list[Reply]] = {
        "intro": [("茶 ", "length"), BackendError("断线 📡")],  # needed a second round, failed
        "body": [("ชา ", "length"), ("ไทย.", "stop")],  # continued and completed
    }
    install(monkeypatch, FakeBackend(scripts))
    code, out, _ = gen_run(capsys, pipeline)
    assert code == 1
    manifest = json.loads((Path(out[-1]) / "manifest.json").read_text("utf-8"))
    assert [len(s["rounds"]) for s in manifest["sections"]] == [1, 2]
    assert manifest["metrics"]["continuation_success_rate"] == 0.5


# -- gen generate ---------------------------------------------------------------------------


def gen_generate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    """`gen generate ARGS...` -> (exit code, stdout, stderr lines)."""
    code = main(["generate", *args])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr.splitlines()


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_generate_reads_the_prompt_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reply = "早上好 🌅 สวัสดีตอนเช้า"
    backend = FakeBackend({"default": [(reply, "stop")]})
    install(monkeypatch, backend)
    prompt = "把这句话翻译成泰语：\n早上好 🌅"
    set_stdin(monkeypatch, (prompt + "\n").encode("utf-8"))
    code, out, err = gen_generate(capsys, "-", "--system", "你是翻译。")
    assert code == 0
    assert backend.calls[0].messages == [
        {"role": "system", "content": "你是翻译。"},
        {"role": "user", "content": prompt},  # the newline that ended stdin is not sent
    ]
    assert out == reply + "\n"  # one trailing newline
    tokens = f"{len('你是翻译。') + len(prompt)} prompt + {len(reply)} completion tokens"
    assert err[-1] == f"finish_reason: stop, {tokens}"  # no stop_reason at the end of text


def test_generate_summary_names_a_stop_string_without_python_reprs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = FakeBackend({"default": [("一二三\n###四", "length")]}, stop_on_strings=True)
    install(monkeypatch, backend)
    code, out, err = gen_generate(capsys, "数数", "--stop", "###")
    assert code == 0
    assert out == "一二三\n"  # it ends with a newline already: none is added
    assert err[-1] == 'finish_reason: stop, stop_reason: "###", 2 prompt + 4 completion tokens'
    assert "None" not in err[-1] and "'" not in err[-1]


def test_generate_json_is_one_object(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"default": [("ชา 🍵", "length")]}))
    code, out, _ = gen_generate(capsys, "茶", "--json")
    assert code == 0
    assert json.loads(out) == {
        "text": "ชา 🍵",
        "finish_reason": "length",
        "stop_reason": None,
        "usage": {"prompt_tokens": 1, "completion_tokens": 4, "total_tokens": 5},
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe bad", "error: stdin: not UTF-8 text"),
        (b"\n\n", "error: stdin: the prompt is empty"),
    ],
)
def test_generate_unusable_stdin_exit_2_before_loading(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    message: str,
) -> None:
    opened = install(monkeypatch, FakeBackend())
    set_stdin(monkeypatch, data)
    code, out, err = gen_generate(capsys, "-")
    assert code == 2 and out == ""
    assert err[-1].startswith(message)
    assert opened == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", str(10**30)], "argument --seed: must be in [0, 2**63), got 1000"),
        (["--seed", "七"], "argument --seed: must be an integer, got 七"),
        (["--dry-sequence-breaker", "\\x"], "error: --dry-sequence-breaker \\x: truncated \\xXX"),
    ],
)
def test_generate_bad_settings_exit_2_before_loading(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    opened = install(monkeypatch, FakeBackend())
    try:
        code = main(["generate", "茶", *args])
    except SystemExit as exc:  # argparse refuses it
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert "Traceback" not in err
    assert opened == []
