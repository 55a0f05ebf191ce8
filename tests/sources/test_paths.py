from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gen.errors import ConfigError, SourceError
from gen.sources.limits import MAX_FILE_BYTES, MAX_FILES
from gen.sources.paths import resolve

MakeFile = Callable[[str, str | bytes], Path]


def names(specs: list[str], base: Path) -> list[str]:
    return [s.name for s in resolve(specs, base).sources]


def test_files_folders_and_globs_in_a_fixed_order(base: Path, make_file: MakeFile) -> None:
    for name in ("notes/b.md", "notes/a.txt", "notes/deep/c.csv", "data/x.jsonl", "top.html"):
        make_file(name, "text\n")
    got = names(["top.html", "notes/", "data/*.jsonl"], base)
    assert got == ["top.html", "notes/a.txt", "notes/b.md", "notes/deep/c.csv", "data/x.jsonl"]
    assert names(["**/*.md", "top.html"], base) == ["notes/b.md", "top.html"]
    assert names(["notes"], base) == names(["notes"], base)  # the same every time


def test_a_file_named_twice_is_read_once(base: Path, make_file: MakeFile) -> None:
    make_file("notes/a.md", "a\n")
    make_file("notes/b.md", "b\n")
    assert names(["notes/b.md", "notes/", "./notes/../notes/a.md"], base) == [
        "notes/b.md",
        "notes/a.md",
    ]


def test_hidden_files_and_folders_are_left_out_of_a_folder(base: Path, make_file: MakeFile) -> None:
    make_file("notes/.draft.md", "x\n")
    make_file("notes/.git/HEAD.md", "x\n")
    make_file("notes/kept.md", "x\n")
    assert names(["notes"], base) == ["notes/kept.md"]
    assert names(["notes/.draft.md"], base) == ["notes/.draft.md"]  # named on its own: read


def test_a_folder_skips_files_of_other_kinds_and_lists_them(
    base: Path, make_file: MakeFile
) -> None:
    make_file("notes/a.md", "x\n")
    make_file("notes/photo.jpg", b"\xff\xd8")
    found = resolve(["notes"], base)
    assert [s.name for s in found.sources] == ["notes/a.md"]
    assert [s.kind for s in found.sources] == ["markdown"]
    assert found.skipped == ("notes/photo.jpg",)


def test_a_file_of_another_kind_named_on_its_own_is_an_error(
    base: Path, make_file: MakeFile
) -> None:
    make_file("photo.jpg", b"\xff\xd8")
    with pytest.raises(SourceError) as raised:
        resolve(["photo.jpg"], base)
    assert str(raised.value).startswith("photo.jpg: not a kind of file gen reads (it reads .md,")


def test_missing_file_and_empty_glob_are_named(base: Path) -> None:
    with pytest.raises(SourceError, match=r"^notes/q3\.pdf: no such file or folder$"):
        resolve(["notes/q3.pdf"], base)
    with pytest.raises(SourceError, match=r"^\*\*/\*\.md: matches no file$"):
        resolve(["**/*.md"], base)


def test_a_source_error_is_a_config_error_with_exit_code_2(base: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve(["gone.md"], base)
    assert raised.value.exit_code == 2 and raised.value.file == "gone.md"


@pytest.mark.parametrize("spec", ["../secret.md", "notes/../../secret.md", "../*.md"])
def test_a_path_out_of_the_folder_is_refused(base: Path, spec: str) -> None:
    (base.parent / "secret.md").write_text("secret\n")
    with pytest.raises(SourceError, match="leads outside the pipeline's folder") as raised:
        resolve([spec], base)
    assert raised.value.file == spec


def test_an_absolute_path_is_accepted_inside_the_folder_only(
    base: Path, make_file: MakeFile
) -> None:
    inside = make_file("notes/a.md", "x\n")
    assert names([str(inside)], base) == ["notes/a.md"]
    outside = base.parent / "elsewhere.md"
    outside.write_text("x\n")
    with pytest.raises(SourceError, match="leads outside") as raised:
        resolve([str(outside)], base)
    assert raised.value.file == str(outside)


def test_a_link_out_of_the_folder_is_refused(base: Path, make_file: MakeFile) -> None:
    (base.parent / "secret.md").write_text("secret\n")
    make_file("notes/ok.md", "x\n")
    (base / "notes" / "link.md").symlink_to(base.parent / "secret.md")
    with pytest.raises(SourceError, match=r"^notes/link\.md: leads outside"):
        resolve(["notes/link.md"], base)
    with pytest.raises(SourceError, match=r"^notes/link\.md: leads outside"):
        resolve(["notes"], base)  # found inside a folder: refused as well
    (base / "out").symlink_to(base.parent, target_is_directory=True)
    with pytest.raises(SourceError, match=r"^out/secret\.md: leads outside"):
        resolve(["out/secret.md"], base)


def test_a_link_inside_the_folder_keeps_its_own_name(base: Path, make_file: MakeFile) -> None:
    make_file("reports/2025.md", "x\n")
    (base / "latest.md").symlink_to(base / "reports" / "2025.md")
    assert names(["latest.md"], base) == ["latest.md"]


def test_a_huge_file_is_refused_from_its_size_without_reading(
    base: Path, make_file: MakeFile
) -> None:
    huge = make_file("dump.md", b"")
    os.truncate(huge, 200 * 1024 * 1024)  # sparse: nothing written
    start = time.perf_counter()
    with pytest.raises(SourceError) as raised:
        resolve(["dump.md"], base)
    assert time.perf_counter() - start < 1.0
    assert str(raised.value) == "dump.md: 200 MB is more than a source may be (20 MB)"
    os.truncate(huge, MAX_FILE_BYTES)  # at the limit: accepted
    assert names(["dump.md"], base) == ["dump.md"]


def test_more_files_than_the_limit_are_refused(base: Path, make_file: MakeFile) -> None:
    for i in range(MAX_FILES + 1):
        make_file(f"many/{i:04d}.txt", "x\n")
    with pytest.raises(SourceError, match=f"^many: the sources come to more than {MAX_FILES}"):
        resolve(["many"], base)


def test_a_pipe_is_refused(base: Path) -> None:
    os.mkfifo(base / "pipe.txt")
    with pytest.raises(SourceError, match=r"^pipe\.txt: not a regular file$"):
        resolve(["pipe.txt"], base)


def test_an_empty_spec_is_refused(base: Path) -> None:
    with pytest.raises(SourceError, match="an empty path"):
        resolve(["  "], base)
