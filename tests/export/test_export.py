"""Exports of a run's document.md: HTML opened in headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright), DOCX read back with python-docx, PDF read back with poppler's tools,
and `gen export` end to end, its errors, and what a failure leaves on disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest

from gen.cli import main
from gen.export import FORMATS, ExportError, export_document, parse_formats
from gen.export.html import guess_lang, markdown_html
from gen.text.markdown import headings, parser, slug

CHROMIUM = Path("/usr/bin/chromium")

DOCUMENT = """\
# 茶与海 Tea and the Sea 🍵

An opening paragraph with **bold tea**, *slow water* and `code`. 茶是一种古老的饮料。

<script>alert("run")</script>

## 第一章 历史

- 唐朝的茶 🍵
- Thai tea: ชาไทย
  - a nested item
- **strong** item

1. first step
2. second step

### ส่วนที่ ๑ ชาไทย

Here is a picture ![the logo](https://example.com/logo.png) and [a link](https://example.com).

## Emoji 😀 and more

> A quote about the sea.

## 😀🎉

## 第一章 历史

最后一段：茶与海。 The end 🌊.
"""

HEADINGS = [
    (1, "茶与海 Tea and the Sea 🍵"),
    (2, "第一章 历史"),
    (3, "ส่วนที่ ๑ ชาไทย"),
    (2, "Emoji 😀 and more"),
    (2, "😀🎉"),
    (2, "第一章 历史"),
]


def make_run(folder: Path, manifest: dict[str, object] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "document.md").write_text(DOCUMENT, encoding="utf-8")
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    run = make_run(tmp_path_factory.mktemp("run"), {"pipeline": "tea", "status": "completed"})
    paths = export_document(run, ["md,html", "docx", "pdf"])
    yield {path.suffix[1:]: path for path in paths}


def in_order(text: str, wanted: list[str]) -> bool:
    at = 0
    for piece in wanted:
        at = text.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def test_every_format_is_written_beside_the_document_and_the_markdown_is_untouched(
    exported: dict[str, Path],
) -> None:
    run = exported["md"].parent
    assert list(exported) == ["md", "html", "docx", "pdf"]
    assert all(path == run / f"document.{fmt}" and path.is_file() for fmt, path in exported.items())
    assert exported["md"].read_text(encoding="utf-8") == DOCUMENT
    assert not list(run.glob(".*.tmp"))


def test_html_is_standalone_with_a_table_of_contents_that_resolves(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    assert CHROMIUM.is_file(), "Debian's chromium is missing: run `make install`"
    html = exported["html"].read_text(encoding="utf-8")
    assert '<meta charset="utf-8">' in html
    assert "<script" not in html.lower()  # the raw <script> is text, escaped
    requests: list[str] = []
    blocked: list[str] = []
    errors: list[str] = []

    def block(route: Route) -> None:
        blocked.append(route.request.url)
        route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 900, "height": 500})
        page.route("http://**/*", block)
        page.route("https://**/*", block)
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("dialog", lambda d: errors.append(f"dialog: {d.message}"))
        page.goto(exported["html"].as_uri())

        assert page.locator("html").get_attribute("lang")
        assert page.title() == HEADINGS[0][1]
        shown = page.locator("body > h1, body > h2, body > h3").all_inner_texts()
        assert shown == [text for _, text in HEADINGS]
        assert '<script>alert("run")</script>' in page.locator("body").inner_text()
        assert page.evaluate("document.scripts.length") == 0

        links = page.locator("nav#contents a")
        assert links.all_inner_texts() == [text for _, text in HEADINGS[1:]]
        hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
        assert len(set(hrefs)) == len(hrefs)  # the repeated heading got its own anchor
        for i, href in enumerate(hrefs):
            target = page.locator(f"[id='{href[1:]}']")
            expect(target).to_have_text(HEADINGS[i + 1][1])
            links.nth(i).click()
            assert page.evaluate("decodeURIComponent(location.hash)") == href
            expect(target).to_be_in_viewport()
        page.screenshot(path=str(tmp_path / "document.png"), full_page=True)
        browser.close()

    assert (tmp_path / "document.png").stat().st_size > 0
    assert errors == []
    assert blocked == []  # the image became a link: nothing was fetched
    assert all(url.startswith(("file://", "data:")) for url in requests), requests


def test_docx_has_word_headings_and_list_styles(exported: dict[str, Path]) -> None:
    document = docx.Document(str(exported["docx"]))
    paragraphs = document.paragraphs
    found = [
        (int(p.style.name.split()[-1]), p.text)
        for p in paragraphs
        if p.style is not None and p.style.name.startswith("Heading")
    ]
    assert found == HEADINGS
    styled = {p.text: p.style.name for p in paragraphs if p.style is not None}
    assert styled["唐朝的茶 🍵"] == "List Bullet"
    assert styled["Thai tea: ชาไทย"] == "List Bullet"
    assert styled["a nested item"] == "List Bullet 2"
    assert styled["first step"] == styled["second step"] == "List Number"
    assert styled["A quote about the sea."] == "Quote"
    assert styled['<script>alert("run")</script>'] == "Normal"
    opening = next(p for p in paragraphs if p.text.startswith("An opening paragraph"))
    assert [r.text for r in opening.runs if r.bold] == ["bold tea"]
    assert [r.text for r in opening.runs if r.italic] == ["slow water"]
    assert document.core_properties.title == HEADINGS[0][1]


def test_pdf_has_pages_and_every_heading_as_text(exported: dict[str, Path], tmp_path: Path) -> None:
    assert shutil.which("pdftotext"), "poppler-utils is missing: run `make install`"
    pdf = str(exported["pdf"])
    info = subprocess.run(["pdfinfo", pdf], capture_output=True, text=True, check=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages >= 1
    text = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", pdf, "-"], capture_output=True, text=True, check=True
    ).stdout
    titles = [t for _, t in HEADINGS]
    assert in_order(text, [titles[0], *titles[1:], *titles[1:]])  # contents, then the body
    assert "茶是一种古老的饮料。" in text
    subprocess.run(
        ["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", pdf, str(tmp_path / "page")],
        check=True,
    )
    assert [p.stat().st_size > 0 for p in tmp_path.glob("page*.png")] == [True]


def test_gen_export_prints_each_written_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    assert main(["export", str(run), "--to", "html,docx", "-t", "md", "--to", "HTML"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [str(run / "document.html"), str(run / "document.docx"), str(run / "document.md")]
    html = (run / "document.html").read_text(encoding="utf-8")
    assert f"<title>{HEADINGS[0][1]}</title>" in html  # no manifest: the first `#` heading


def test_gen_export_in_a_fresh_process(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", {"title": "A title from the manifest"})
    done = subprocess.run(
        [sys.executable, "-m", "gen.cli", "export", str(run), "--to", "html"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(run / "document.html")
    assert "<title>A title from the manifest</title>" in (run / "document.html").read_text("utf-8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "html,rtf"], "unknown export format 'rtf'; choose from md, html, docx, pdf"),
        (["--to", "odt", "--to", "pdf"], "unknown export format 'odt'"),
        (["--to", " , "], "--to names no format; choose from md, html, docx, pdf"),
    ],
)
def test_gen_export_refuses_an_unknown_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    run = make_run(tmp_path / "run")
    assert main(["export", str(run), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in run.iterdir()) == ["document.md"]


def test_gen_export_without_a_document_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(tmp_path), "--to", "html"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}: no document.md here") and "Traceback" not in err
    assert main(["export", str(tmp_path / "missing"), "--to", "html"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_a_failed_write_leaves_the_previous_file_and_no_partial_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run(tmp_path / "run")
    export_document(run, ["docx"])
    before = (run / "document.docx").read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gen.pipeline.run.rundir.os.fsync", disk_full)  # before the rename
    with pytest.raises(ExportError, match=r"document\.docx: cannot write it: No space left"):
        export_document(run, ["docx", "html"])
    assert (run / "document.docx").read_bytes() == before
    assert not (run / "document.html").exists()
    assert not list(run.glob(".*.tmp"))
    assert (run / "document.md").read_text(encoding="utf-8") == DOCUMENT


def test_a_failing_format_writes_no_format_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")

    def broken(html: str) -> bytes:
        raise RuntimeError("layout blew up")

    monkeypatch.setattr("gen.export.pdf.pdf_bytes", broken)
    assert main(["export", str(run), "--to", "html,pdf"]) == 1
    assert capsys.readouterr().err == "error: pdf export failed: RuntimeError: layout blew up\n"
    assert sorted(p.name for p in run.iterdir()) == ["document.md"]


def test_a_missing_pdf_engine_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # `import weasyprint` fails
    with pytest.raises(ExportError) as caught:
        export_document(run, ["pdf"])
    assert "pip install weasyprint" in str(caught.value)
    assert "libpango-1.0-0" in str(caught.value)
    assert main(["export", str(run), "--to", "pdf"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: PDF export needs WeasyPrint") and "Traceback" not in err
    assert not (run / "document.pdf").exists()


def test_anchors_are_unique_and_keep_every_script() -> None:
    found = headings(parser().parse(DOCUMENT))
    assert [(h.level, h.text) for h in found] == HEADINGS
    assert [h.anchor for h in found] == [
        "茶与海-tea-and-the-sea",
        "第一章-历史",
        "ส่วนที่-๑-ชาไทย",  # Thai vowel and tone marks are kept
        "emoji-and-more",
        "section",
        "第一章-历史-1",
    ]
    assert slug("Café  Über—naïve!") == "café-über-naïve"


def test_formats_are_read_in_order_each_once() -> None:
    assert parse_formats(["html, DOCX", "pdf", "html", ".md"]) == ["html", "docx", "pdf", "md"]
    assert parse_formats([",".join(FORMATS)]) == list(FORMATS)
    with pytest.raises(ExportError, match="choose from md, html, docx, pdf"):
        parse_formats(["tex"])


def test_the_page_language_follows_the_text() -> None:
    assert guess_lang("茶是一种古老的饮料。Tea is old.") == "zh"
    assert guess_lang("ชาไทยเป็นเครื่องดื่ม") == "th"
    assert guess_lang("お茶を飲みます。日本") == "ja"
    assert guess_lang("Plain English text, 一.") == "en"
    page = markdown_html("# 标题\n\n正文。", "标题", toc=True)
    assert '<html lang="zh">' in page and "目录" not in page  # nothing to list under the title


def test_a_pipeline_writes_its_formats_when_the_run_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`document: {formats: [...]}`: the run writes document.html/.docx beside
    document.md and names them in the manifest; a failed format is an error event and the
    run keeps its document."""
    from tests.pipeline.fake_backend import FakeBackend, pipeline_from, read_events, run

    yaml = """\
name: t
model: fake
sections:
  - id: body
    prompt: "[body] Write."
document:
  title: 茶道 😀
  formats: [md, html, docx]
"""
    backend = FakeBackend({"body": [("## 茶的历史\n\n茶在唐朝流行。", "stop")]})
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    folder = prepared.run_dir.path
    assert manifest["status"] == "completed"
    assert manifest["exports"] == ["document.html", "document.docx"]
    assert "茶的历史" in (folder / "document.html").read_text("utf-8")
    assert (folder / "document.docx").stat().st_size > 0

    bad = yaml.replace("[md, html, docx]", "[md, pdf]")

    def broken(html: str) -> bytes:
        raise ExportError("no PDF engine here")

    monkeypatch.setattr("gen.export.pdf.pdf_bytes", broken)
    manifest, prepared = run(pipeline_from(bad), FakeBackend(), tmp_path / "b")
    assert manifest["status"] == "completed" and manifest["exports"] == []
    assert (prepared.run_dir.path / "document.md").is_file()
    events = read_events(prepared.run_dir.path / "events.jsonl")
    assert any(e["type"] == "error" and "no PDF engine" in e["message"] for e in events)
