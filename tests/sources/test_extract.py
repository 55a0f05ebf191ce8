from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from gen.errors import SourceError
from gen.sources import cache, extract
from gen.sources.document import Block
from gen.sources.extract import load

MakeFile = Callable[[str, str | bytes], Path]


def test_a_document_has_its_path_kind_hash_and_blocks(base: Path, make_file: MakeFile) -> None:
    data = "# Notes\n\nThe depot opens in 2027.\n"
    make_file("notes/a.md", data)
    (document,) = load(["notes"], base)
    assert (document.path, document.kind) == ("notes/a.md", "markdown")
    assert document.sha256 == hashlib.sha256(data.encode()).hexdigest()
    assert [b.text for b in document.blocks] == ["The depot opens in 2027."]
    assert document.chars == len("The depot opens in 2027.")


def test_binary_content_under_a_text_name_is_refused(base: Path, make_file: MakeFile) -> None:
    make_file("photo.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(SourceError) as raised:
        load(["photo.md"], base)
    assert str(raised.value) == "photo.md: binary content (it holds NUL bytes), not text"


def test_text_that_is_not_utf8_is_refused(base: Path, make_file: MakeFile) -> None:
    make_file("latin.txt", "Prix: 2,10 € à Kessling, été 2025.\n".encode("cp1252") * 3)
    with pytest.raises(SourceError, match=r"^latin.txt: not UTF-8 text \(\d+ bytes"):
        load(["latin.txt"], base)


def test_a_stray_byte_in_long_utf8_text_is_replaced(base: Path, make_file: MakeFile) -> None:
    make_file("mostly.txt", ("word " * 400).encode() + b"caf\xe9\n")
    (document,) = load(["mostly.txt"], base)
    assert document.blocks[0].text.endswith("caf\ufffd")


def test_a_damaged_pdf_is_refused_with_the_reason(base: Path, make_file: MakeFile) -> None:
    make_file("notes/q3.pdf", b"this is not a pdf at all")
    with pytest.raises(SourceError) as raised:
        load(["notes/q3.pdf"], base)
    assert str(raised.value) == "notes/q3.pdf: not a PDF (no %PDF header)"
    make_file("cut.pdf", b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
    with pytest.raises(SourceError, match=r"^cut.pdf: cannot read PDF: \S") as raised:
        load(["cut.pdf"], base)
    assert "\n" not in str(raised.value) and "Traceback" not in str(raised.value)


def test_a_truncated_pdf_is_refused(
    base: Path, make_pdf: Callable[[str, Sequence[str]], Path]
) -> None:
    path = make_pdf("whole.pdf", ["<p>Some text.</p>"])
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    with pytest.raises(SourceError, match=r"^whole.pdf: (cannot read PDF|no text in it)"):
        load(["whole.pdf"], base)


def test_a_second_read_takes_the_blocks_from_the_cache(
    base: Path,
    make_pdf: Callable[[str, Sequence[str]], Path],
    monkeypatch: pytest.MonkeyPatch,
    gen_home: Path,
) -> None:
    make_pdf("review.pdf", ["<p>Revenue was EUR 84.2 million.</p>", "<p>62 trams.</p>"])
    calls: list[int] = []
    parse = extract.READERS["pdf"]

    def counted(data: bytes) -> list[Block]:
        calls.append(len(data))
        return parse(data)

    monkeypatch.setitem(extract.READERS, "pdf", counted)
    first = load(["review.pdf"], base)
    second = load(["review.pdf"], base)
    assert len(calls) == 1
    assert first == second and [b.location.page for b in second[0].blocks] == [1, 2]
    assert list((gen_home / "sources").rglob(f"*.pdf.v{cache.VERSION}.json"))


def test_a_damaged_cache_entry_is_a_miss(base: Path, make_file: MakeFile) -> None:
    make_file("a.md", "Text.\n")
    (document,) = load(["a.md"], base)
    cache.entry(document.sha256, "markdown").write_text("{not json", encoding="utf-8")
    assert load(["a.md"], base) == [document]
    cache.entry(document.sha256, "markdown").write_text('{"blocks": [{"text": 3}]}', "utf-8")
    assert load(["a.md"], base) == [document]


def test_the_same_bytes_under_two_names_are_two_documents(base: Path, make_file: MakeFile) -> None:
    make_file("a.md", "Same text.\n")
    make_file("b.md", "Same text.\n")
    a, b = load(["a.md", "b.md"], base)
    assert (a.path, b.path) == ("a.md", "b.md") and a.blocks == b.blocks


def test_all_sources_together_have_a_character_limit(
    base: Path, make_file: MakeFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extract, "MAX_CHARS", 100)
    make_file("a.txt", "x" * 60 + "\n")
    make_file("b.txt", "y" * 60 + "\n")
    assert len(load(["a.txt"], base)) == 1
    with pytest.raises(SourceError, match=r"^b\.txt: the sources hold more than 100 characters"):
        load(["a.txt", "b.txt"], base)


def test_a_file_grown_past_the_limit_after_it_was_resolved_is_refused(
    base: Path, make_file: MakeFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_file("a.txt", "x" * 50)
    monkeypatch.setattr(extract, "MAX_FILE_BYTES", 10)
    with pytest.raises(SourceError, match=r"^a\.txt: more than a source may be"):
        load(["a.txt"], base)


def test_a_reader_s_line_is_in_the_error(base: Path, make_file: MakeFile) -> None:
    make_file("log.jsonl", '{"a": 1}\n{"a": }\n')
    with pytest.raises(SourceError) as raised:
        load(["log.jsonl"], base)
    assert str(raised.value).startswith("log.jsonl:2: not JSON: Expecting value")
