"""`--set defaults.KEY=VALUE` and `--set sections.ID.KEY=VALUE`: generation settings from
the command line, read as YAML and validated like the file; plain keys stay inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen.cli import main
from gen.errors import ConfigError
from gen.pipeline import load_pipeline
from tests.pipeline.conftest import WritePipeline
from tests.pipeline.fake_backend import FakeBackend, install

PIPELINE = """
inputs:
  主题: 长城
defaults:
  max_tokens: 64
  temperature: 0.7
sections:
  - id: intro
    prompt: "[intro] 写 {{ 主题 }}"
  - id: body
    prompt: "[body] 再写 {{ 主题 }}"
    max_words: 500
"""


@pytest.fixture
def path(write_pipeline: WritePipeline) -> Path:
    return write_pipeline(PIPELINE)


def test_defaults_and_section_settings_are_set(path: Path) -> None:
    pipeline = load_pipeline(
        path,
        {
            "defaults.max_tokens": "5",
            "defaults.temperature": "0",
            "defaults.stop": '["\\n\\n", 完]',
            "defaults.seed": "7",
            "sections.body.target_words": "300",
            "sections.body.temperature": "1.2",
            "主题": "印刷术",
        },
    )
    intro, body = pipeline.settings_for("intro"), pipeline.settings_for("body")
    assert (intro.max_tokens, intro.temperature, intro.seed) == (5, 0.0, 7)
    assert intro.stop == ["\n\n", "完"]
    assert (body.max_tokens, body.temperature) == (5, 1.2)  # the section's own wins
    assert pipeline.section("body").target_words == 300
    assert pipeline.section("body").max_words == 500  # what the file set stays
    assert pipeline.inputs == {"主题": "印刷术"}  # a plain key is still an input


def test_text_that_reads_as_a_mapping_stays_text(path: Path) -> None:
    pipeline = load_pipeline(path, {"defaults.system": "简短: 两行", "defaults.seed": "null"})
    assert pipeline.defaults.system == "简短: 两行"
    assert pipeline.defaults.seed is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("defaults.max_tokens", "0", "--set defaults.max_tokens: must be > 0, got 0"),
        ("defaults.max_tokens", "lots", "--set defaults.max_tokens: must be an integer"),
        ("defaults.seed", str(10**30), "--set defaults.seed: must be < 9223372036854775808"),
        ("sections.intro.top_p", "2", "--set sections.intro.top_p: must be <= 1.0, got 2"),
        ("defaults.max_tokenz", "5", "unknown key 'max_tokenz'; did you mean 'max_tokens'?"),
        ("sections.intr.seed", "1", "unknown section id 'intr'; did you mean 'intro'?"),
        ("sections.intro.prompt", "x", "unknown key 'prompt'; allowed: max_tokens"),
        ("default.max_tokens", "5", "unknown setting; did you mean 'defaults.max_tokens'?"),
        ("sections.intro", "5", "settings are defaults.<key> or sections.<id>.<key>"),
    ],
)
def test_bad_settings_name_the_option(path: Path, key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_pipeline(path, {key: value})
    assert message in str(info.value)
    assert str(info.value).startswith(f"--set {key}: ")


def test_gen_run_samples_with_the_settings(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = FakeBackend()
    install(monkeypatch, backend)
    args = ["run", str(path), "--out", str(path.parent / "out")]
    sets = ["--set", "defaults.max_tokens=5", "--set", "sections.body.max_tokens=9"]
    assert main([*args, *sets, "--set", "主题=长城"]) == 0
    by_section = {call.key: call.params.max_tokens for call in backend.calls}
    assert by_section == {"intro": 5, "body": 9}
    assert "长城" in backend.calls[0].messages[-1]["content"]


def test_gen_validate_refuses_a_bad_setting_with_exit_2(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(path), "--set", "defaults.temperature=-1"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --set defaults.temperature: must be >= 0.0, got -1\n"
