"""--out and --events checked before a model loads: a file, under a file, a missing or
unwritable folder is a user error (exit 2) that names the path; nothing is left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gen.cli import main
from gen.errors import ConfigError
from gen.pipeline.run.rundir import check_events_path, check_out_dir
from tests.pipeline.fake_backend import FakeBackend, install

AS_ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def test_a_new_or_existing_folder_is_fine(tmp_path: Path) -> None:
    check_out_dir(tmp_path)
    check_out_dir(tmp_path / "new" / "deeper")
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing, makes no folder


def test_out_at_a_file(tmp_path: Path) -> None:
    (tmp_path / "文档.md").write_text("x", "utf-8")
    with pytest.raises(ConfigError, match=r"文档\.md is a file, not a folder"):
        check_out_dir(tmp_path / "文档.md")


def test_out_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", "utf-8")
    with pytest.raises(ConfigError, match="is a file, so no folder can be made in it") as info:
        check_out_dir(tmp_path / "f" / "a" / "b")
    assert str(info.value).startswith(f"--out {tmp_path / 'f' / 'a' / 'b'}: cannot write the run")


@pytest.mark.skipif(AS_ROOT, reason="root writes in read-only folders")
def test_out_in_a_read_only_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        with pytest.raises(ConfigError, match="Permission denied"):
            check_out_dir(locked / "out")
    finally:
        locked.chmod(0o755)


def test_out_where_even_root_cannot_write() -> None:
    # os.access says yes to root here; only trying to write tells the truth
    probe = Path("/sys/gen-probe")
    if not probe.parent.is_dir():
        pytest.skip("no /sys")
    try:
        probe.mkdir()
    except OSError:
        pass
    else:
        probe.rmdir()
        pytest.skip("/sys accepts new folders here")
    with pytest.raises(ConfigError, match=r"cannot write the run: .*: /sys"):
        check_out_dir(Path("/sys/gen-out"))


def test_events_to_stdout_none_or_a_new_file_are_fine(tmp_path: Path) -> None:
    check_events_path(None)
    check_events_path("-")
    check_events_path(str(tmp_path / "事件.jsonl"))
    kept = tmp_path / "old.jsonl"
    kept.write_text("keep me\n", "utf-8")
    check_events_path(str(kept))
    assert kept.read_text("utf-8") == "keep me\n"  # checked, not truncated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("a folder", "it is a folder; give a file, or - for stdout"),
        ("under a missing folder", "does not exist"),
        ("under a file", "is a file"),
    ],
)
def test_events_paths_that_cannot_be_written(tmp_path: Path, where: str, message: str) -> None:
    (tmp_path / "f").write_text("x", "utf-8")
    target = {
        "a folder": tmp_path,
        "under a missing folder": tmp_path / "missing" / "e.jsonl",
        "under a file": tmp_path / "f" / "e.jsonl",
    }[where]
    with pytest.raises(ConfigError, match=message) as info:
        check_events_path(str(target))
    assert str(info.value).startswith(f"--events {target}: cannot write: ")


@pytest.mark.parametrize("option", ["--out", "--events"])
def test_gen_run_refuses_them_before_the_model_loads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    option: str,
) -> None:
    opened = install(monkeypatch, FakeBackend())
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("sections:\n  - {id: a, prompt: Hi}\n", "utf-8")
    target = pipeline / "under-a-file"
    args = ["--out", str(target)] if option == "--out" else ["--events", str(target)]
    if option == "--events":
        args += ["--out", str(tmp_path / "out")]
    assert main(["run", str(pipeline), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option} {target}: cannot write")
    assert opened == [] and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("run_id", ["../../escaped", "a/b", "..", "", "a\0b"])
def test_a_run_id_that_is_not_a_folder_name_is_refused(tmp_path: Path, run_id: str) -> None:
    from gen.pipeline.run.rundir import RunDir

    with pytest.raises(ConfigError, match="not a plain folder name"):
        RunDir.create(tmp_path / "out", "p", run_id or "..")
    assert not (tmp_path / "escaped").exists()
    assert RunDir.create(tmp_path / "out", "p", "20261202-茶").path.is_dir()


def test_resume_never_follows_a_symlinked_run_out_of_the_folder(tmp_path: Path) -> None:
    from gen.pipeline.run.rundir import RunDir

    outside = tmp_path / "outside" / "run-1"
    outside.mkdir(parents=True)
    (outside / "manifest.json").write_text("{}", encoding="utf-8")
    out = tmp_path / "out"
    (out / "p").mkdir(parents=True)
    (out / "p" / "run-9").symlink_to(outside)
    assert RunDir.latest(out, "p") is None
    (tmp_path / "out2").mkdir()
    (tmp_path / "out2" / "p").symlink_to(tmp_path / "outside")
    assert RunDir.latest(tmp_path / "out2", "p") is None
