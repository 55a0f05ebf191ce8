"""A cited document's exports: each marker's numbers link to their References entry in the HTML
(opened in headless Chromium), the PDF printed from it (read back with pypdf) and the DOCX (its
hyperlinks and bookmarks read back with python-docx); code, link text and multibyte text stay as
they were, and a document without References links nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docx
import pypdf
import pytest

from gen.export import export_document
from gen.export.html import markdown_html
from gen.export.references import find_references, split_markers
from gen.text.markdown import parser

CHROMIUM = Path("/usr/bin/chromium")

CITED = """\
# 有轨电车 Tramways 2025 🚋

## 客流 Ridership

电车在2025年运送了4870万人次 [1]。 Trams ran 62 vehicles [2, 3], 茶 🍵 [3].

Code keeps its brackets: `tram[1]` and a [link to [2]](https://example.com).

```
route[2] = "Line 4"
```

Brackets that point nowhere stay text: [9] and [1, 9].

## 参考文献

[1] sources/tramways/overview.md, "Kessling > 客流", lines 19-24: "电车运送了4870万人次…"

[2] sources/tramways/annual-review-2025.pdf, page 2: "KRT ran 62 trams at the end of 2025."

[3] sources/tramways/fleet.csv, rows 2-5: "茶 🍵 and trams"
"""

ENTRIES = {  # as the References paragraphs read
    int(line[1]): line for line in CITED.splitlines() if line.startswith("[") and "sources/" in line
}
MARKED = [1, 2, 3, 3]  # the numbers linked in the body, in order
CLAIMS = "电车在2025年运送了4870万人次 [1]。 Trams ran 62 vehicles [2, 3], 茶 🍵 [3]."


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    run = tmp_path_factory.mktemp("run")
    (run / "document.md").write_text(CITED, encoding="utf-8")
    yield {p.suffix[1:]: p for p in export_document(run, ["html", "docx", "pdf"])}


def test_references_are_found_under_any_heading_and_only_as_the_last_section() -> None:
    refs = find_references(parser().parse(CITED))
    assert sorted(refs.entries) == [1, 2, 3]
    english = CITED.replace("## 参考文献", "## References")
    assert sorted(find_references(parser().parse(english)).entries) == [1, 2, 3]
    trailing = CITED + "\nA closing paragraph that is no entry.\n"
    assert find_references(parser().parse(trailing)).entries == {}
    assert find_references(parser().parse("# Only a title\n")).entries == {}


def test_markers_split_only_when_every_number_is_an_entry() -> None:
    known = {1: 0, 2: 0, 5: 0}
    assert split_markers("茶 [1]。 Also [2, 5] and [1, 9] 🍵", known) == [
        "茶 ",
        (1,),
        "。 Also ",
        (2, 5),
        " and [1, 9] 🍵",
    ]
    assert split_markers("[9]", known) == ["[9]"]


def test_html_markers_link_to_entries_in_a_browser(exported: dict[str, Path]) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    assert CHROMIUM.is_file(), "Debian's chromium is missing: run `make install`"
    blocked: list[str] = []
    errors: list[str] = []

    def block(route: Route) -> None:
        blocked.append(route.request.url)
        route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 900, "height": 400})
        page.route("http://**/*", block)
        page.route("https://**/*", block)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(exported["html"].as_uri())

        cites = page.locator("a.cite")
        hrefs = [cites.nth(i).get_attribute("href") for i in range(cites.count())]
        assert hrefs == [f"#ref-{n}" for n in MARKED]
        assert cites.all_inner_texts() == [str(n) for n in MARKED]
        for number, entry in ENTRIES.items():
            expect(page.locator(f"[id='ref-{number}']")).to_have_text(entry)
        every = page.evaluate(
            "[...document.querySelectorAll('a[href^=\"#ref-\"]')]"
            ".map(a => !!document.getElementById(a.getAttribute('href').slice(1)))"
        )
        assert every and all(every)  # every link resolves
        cites.nth(1).click()
        assert page.evaluate("location.hash") == "#ref-2"
        expect(page.locator("[id='ref-2']")).to_be_in_viewport()

        body = page.locator("body").inner_text()
        assert CLAIMS in body
        assert "Brackets that point nowhere stay text: [9] and [1, 9]." in body
        expect(page.locator("p code")).to_have_text("tram[1]")
        expect(page.locator("pre code")).to_have_text('route[2] = "Line 4"\n')
        expect(page.locator("a[href='https://example.com']")).to_have_text("link to [2]")
        assert page.locator("pre a, code a, a a").count() == 0
        browser.close()
    assert errors == [] and blocked == []


def test_pdf_markers_are_internal_links_to_their_entries(exported: dict[str, Path]) -> None:
    reader = pypdf.PdfReader(exported["pdf"])
    destinations = reader.named_destinations
    links = [
        str(annot.get_object().get("/Dest"))
        for page in reader.pages
        for annot in page.get("/Annots") or []
    ]
    cited = [d for d in links if d.startswith("ref-")]
    assert cited == [f"ref-{n}" for n in MARKED]
    assert all(d in destinations for d in cited)
    text = "".join(page.extract_text() for page in reader.pages)
    assert "电车在2025年运送了4870万人次" in text


def test_docx_markers_are_hyperlinks_to_bookmarked_entries(exported: dict[str, Path]) -> None:
    document = docx.Document(str(exported["docx"]))
    paragraphs = document.paragraphs
    body = next(p for p in paragraphs if p.text.startswith("电车"))
    assert body.text == CLAIMS
    assert [(link.fragment, link.text) for link in body.hyperlinks] == [
        (f"ref_{n}", str(n)) for n in MARKED
    ]
    entries = [p for p in paragraphs if p.text.startswith("[") and "sources/" in p.text]
    assert [p.text for p in entries] == list(ENTRIES.values())  # one paragraph each
    names = [
        mark.get(docx.oxml.ns.qn("w:name"))
        for p in entries
        for mark in p._p.findall(docx.oxml.ns.qn("w:bookmarkStart"))
    ]
    assert names == ["ref_1", "ref_2", "ref_3"]
    code = next(p for p in paragraphs if p.text.startswith("Code keeps"))
    assert code.hyperlinks == []
    assert not any(p.hyperlinks for p in paragraphs if p.text.startswith(("Brackets", "route")))


def test_a_document_without_references_links_nothing() -> None:
    page = markdown_html("# 茶\n\nA claim [1] with no References.\n", "茶")
    assert "A claim [1] with no References." in page and "ref-1" not in page
