"""`gen validate` and `gen run` as users call them: exit codes, what goes to stdout and
stderr, --set, --events, --stream, --resume; `gen run` uses a scripted backend here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gen.cli import main
from gen.errors import BackendError
from tests.pipeline.fake_backend import FakeBackend, install

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
    assert out.strip().endswith("ok (3 sections, model smollm2-135m)")
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


def test_run_events_to_stdout(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"intro": [("Tea ", "length"), ("leaves.", "stop")]}))
    code, out, _ = gen_run(capsys, pipeline, "--events", "-")
    assert code == 0
    events = [json.loads(line) for line in out[:-1]]  # every line but the path is JSON
    assert Path(out[-1]).name == "document.md"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert len({e["run_id"] for e in events}) == 1
    on_disk = (Path(out[-1]).parent / "events.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in on_disk] == events


def test_run_events_to_a_file(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend())
    target = pipeline.parent / "events.jsonl"
    code, out, _ = gen_run(capsys, pipeline, "--events", str(target))
    assert code == 0 and len(out) == 1
    types = [json.loads(line)["type"] for line in target.read_text("utf-8").splitlines()]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("section_finished") == 2


def test_run_stream_writes_the_text_to_stdout(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, FakeBackend({"intro": [("Tea is a drink 🍵.", "stop")]}))
    code, out, err = gen_run(capsys, pipeline, "--stream")
    assert code == 0
    assert out[:-1] == ["Tea is a drink 🍵.", "", "Text of body.", ""]
    assert Path(out[-1]).name == "document.md"
    assert "Tea is a drink" not in err


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


def test_sandbox_violation_in_a_later_section_fails_that_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "late.yaml"
    path.write_text(
        SANDBOX.format(expr="topic")
        + '  - id: b\n    prompt: "[b] {{ sections.a.text | attr(name) }}"\n',
        encoding="utf-8",
    )
    backend = FakeBackend()
    install(monkeypatch, backend)
    code, out, _ = gen_run(capsys, path)
    assert code == 1
    manifest = json.loads((Path(out[-1]) / "manifest.json").read_text("utf-8"))
    b = {s["id"]: s for s in manifest["sections"]}["b"]
    assert b["status"] == "failed" and "blocked by the template sandbox" in b["error"]
    assert backend.call_keys() == ["a"]
