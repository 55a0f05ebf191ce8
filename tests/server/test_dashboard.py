"""The dashboard at / in a real browser: headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright; `make install` gets it, nothing is downloaded) on a real `gen serve`.
A run is started from the form, its text appears live, the event stream is dropped once
mid-run, and at the end each section's text on the page equals the section on disk. A
run with failed sections (written beside it by a scripted backend) shows which and why, and
a scripted run with sources its passages and citation figures."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen.backends.base import Message
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run
from tests.pipeline.run.test_status import SCRIPTS, STATUS

from .conftest import Server, running_server

pytestmark = pytest.mark.real_model

CHROMIUM = Path("/usr/bin/chromium")

PIPELINE = """\
# Two short sections, for the dashboard test.
name: glance
defaults: {max_tokens: 24, max_rounds: 3, temperature: 0.7, seed: 9}
inputs:
  topic: 茶 and 😀
sections:
  - id: opening
    prompt: "Write three sentences about {{ topic }}."
    target_words: 50
  - id: closing
    prompt: "Write two sentences about the sea in ไทย."
    target_words: 30
    depends_on: [opening]
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pipelines = tmp_path_factory.mktemp("pipelines")
    (pipelines / "glance.yaml").write_text(PIPELINE, encoding="utf-8")
    return pipelines, tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def server(folders: tuple[Path, Path]) -> Iterator[Server]:
    pipelines, out = folders
    with running_server("--pipelines", str(pipelines), "--out", str(out)) as s:
        yield s


def test_a_run_started_from_the_form_streams_live_and_survives_a_dropped_stream(
    server: Server, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert CHROMIUM.is_file(), "Debian's chromium is missing: run `make install`"
    _, out = folders
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(server.url)

        form = page.locator("form#new-run")
        form.locator("select#pipeline").select_option("glance")
        topic = form.locator('[name="topic"]')
        expect(topic).to_have_value("茶 and 😀")  # the input's default, as a field
        topic.fill("ไทย tea 🍵 and 茶")
        form.locator("button[type=submit]").click()

        run = page.locator("li.run[data-run-id]").first
        expect(run).to_be_visible()
        run_id = run.get_attribute("data-run-id")
        assert run_id
        # text appears while the run goes on
        opening = page.locator('.section[data-section="opening"] .section-text')
        expect(opening).not_to_have_text("", timeout=120_000)
        assert page.locator("#run-status").get_attribute("data-status") in ("running", "queued")

        # drop the event stream once, mid-run; the page picks up after its last event
        seen = page.evaluate("window.genDashboard.lastSeq()")
        page.evaluate("window.genDashboard.restartStream()")
        expect(page.locator("#run-status")).to_have_attribute(
            "data-status", "completed", timeout=300_000
        )
        assert page.evaluate("window.genDashboard.lastSeq()") > seen

        (folder,) = out.glob(f"*/{run_id}")
        for key in ("opening", "closing"):
            on_disk = (folder / "sections" / f"{key}.md").read_text("utf-8")
            shown = page.evaluate(f"window.genDashboard.sectionText('{key}')")
            assert shown == on_disk  # nothing doubled, nothing missing
            card = page.locator(f'.section[data-section="{key}"] .section-text')
            assert card.text_content() == on_disk
        assert "ไทย tea 🍵 and 茶" in (folder / "manifest.json").read_text("utf-8")

        # the finished document, rendered, with a download link; the timeline
        expect(page.locator("#document")).to_contain_text(on_disk.split(".")[0][:20])
        assert page.locator("a#download").get_attribute("href") == f"/v1/runs/{run_id}/document"
        expect(page.locator("img#timeline")).to_be_visible()
        expect(page.locator("#total-coherence")).to_contain_text("overlap")  # run_finished
        assert page.locator("svg#tps-sparkline polyline").count() >= 1
        expect(page.locator(f'li.run[data-run-id="{run_id}"]')).to_have_attribute(
            "data-status", "completed"
        )
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        browser.close()
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000
    assert errors == []


def test_failed_sections_show_their_reasons(server: Server, folders: tuple[Path, Path]) -> None:
    from playwright.sync_api import Locator, expect, sync_playwright

    _, out = folders
    # a finished run as `gen run` leaves it: looping, stalled and short fail, cut is only
    # truncated (it has no target), sound is fine
    manifest, _ = run(pipeline_from(STATUS), FakeBackend(dict(SCRIPTS)), out)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{server.url}/#run={manifest['run_id']}")

        def flag(key: str, kind: str) -> Locator:
            return page.locator(f'.section[data-section="{key}"] .flag.{kind}')

        expect(flag("looping", "failed")).to_have_text("failed: loops", timeout=30_000)
        expect(flag("stalled", "failed")).to_have_text("failed: stalled, truncated")
        expect(flag("stalled", "failed")).to_have_attribute("title", re.compile("no letter"))
        expect(flag("short", "failed")).to_have_text("failed: truncated")
        expect(flag("cut", "truncated")).to_have_text("truncated")
        expect(flag("cut", "failed")).to_have_count(0)
        expect(page.locator('.section[data-section="sound"] .flag.bad')).to_have_count(0)
        expect(page.locator("#total-sections")).to_have_text("5 / 5 · 3 failed")
        expect(page.locator("#run-status")).to_have_attribute("data-status", "completed")
        browser.close()
    assert errors == []


CITED = """
name: cited
defaults: {max_tokens: 400, temperature: 0.7, seed: 3}
sources: [docs/]
citations: attribute
sections:
  - {id: riders, title: 客流 Ridership, prompt: "[riders] Write about ridership and the fleet."}
  - {id: money, title: Budget, prompt: "[money] Write about the Line 4 budget."}
"""
CITED_SCRIPTS: dict[str, list[Reply]] = {
    # two markers kept, one number (7) that points at no passage dropped; gen cites the third
    "riders": [
        (
            "Trams carried 48.7 million boardings in 2025 [1]. KRT ran 62 trams at the end "
            "of 2025 [2, 7]. 新电车有十二辆 🚋。",
            "stop",
        )
    ],
    # no marker: gen cites the first sentence, the second holds a figure no passage has
    "money": [
        ("The Line 4 extension cost 312 million euros. It was opened by 9,999 dragons.", "stop")
    ],
}


def cited_key(messages: list[Message]) -> str:
    """The section's `[key]`: its prompt's Sources block numbers passages `[1]`, `[2]` first."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    found = re.search(r"\[([a-z]+)\]", user)
    return found.group(1) if found else "default"


def test_a_run_with_sources_shows_its_passages_and_citation_figures(
    server: Server, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """Each section's passages come from its `sources` event and its figures from
    `section_finished` (the manifest's copies are withheld from the page here); the run's
    figures from the finished manifest; the document's citation links stay in the page."""
    from playwright.sync_api import Route, expect, sync_playwright

    _, out = folders
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "trams.md").write_text(
        "# 有轨电车 Tramways\n\n## 客流 Ridership\n\nTrams carried 48.7 million boardings in "
        "2025.\n\n## 车队 Fleet\n\nKRT ran 62 trams at the end of 2025. 新电车有十二辆 🚋。\n",
        encoding="utf-8",
    )
    (docs / "budget.md").write_text(
        "# Budget\n\nThe Line 4 extension cost 312 million euros, against 295 million.\n",
        encoding="utf-8",
    )
    backend = FakeBackend(dict(CITED_SCRIPTS), keys=cited_key)
    manifest, _ = run(pipeline_from(CITED, base_dir=tmp_path), backend, out)
    run_id = manifest["run_id"]
    sections = {s["id"]: s for s in manifest["sections"]}
    assert manifest["citations"]["references"] == 3

    def without_section_figures(route: Route) -> None:
        answer = route.fetch()
        body = answer.json()
        for section in body.get("sections", []):
            section.pop("passages", None)
            section.pop("citing", None)
        route.fulfill(response=answer, json=body)

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.route(f"**/v1/runs/{run_id}", without_section_figures)
        page.goto(f"{server.url}/#run={run_id}")

        expect(page.locator("#run-status")).to_have_attribute(
            "data-status", "completed", timeout=30_000
        )
        for key in ("riders", "money"):
            shown = page.locator(f'.section[data-section="{key}"] .passage')
            expect(shown).to_have_count(len(sections[key]["passages"]))
            for i, passage in enumerate(sections[key]["passages"]):
                item = shown.nth(i)
                expect(item.locator(".passage-number")).to_have_text(f"[{i + 1}]")
                expect(item.locator(".passage-path")).to_have_text(passage["path"])
                expect(item.locator(".passage-location")).to_have_text(passage["location"])
                expect(item.locator(".passage-score")).to_have_text(f"score {passage['score']}")
        riders = page.locator('.section[data-section="riders"]')
        expect(riders.locator(".passage-location").first).to_contain_text("客流 Ridership")
        expect(riders.locator(".cite-model")).to_have_text("2 model citations · 1 dropped")
        expect(riders.locator(".cite-attributed")).to_have_text("1 gen-attributed")
        expect(riders.locator(".cite-supported")).to_have_text("supported 100%")
        money = page.locator('.section[data-section="money"]')
        expect(money.locator(".cite-unsupported")).to_have_text("1 unsupported fact")
        expect(money.locator(".cite-unsupported")).to_have_attribute(
            "title", "It was opened by 9,999 dragons."
        )
        expect(money.locator(".cite-supported")).to_have_text("supported –")

        figures = manifest["citations"]
        expect(page.locator("#citations-panel")).to_be_visible()
        expect(page.locator("#cite-references")).to_have_text(str(figures["references"]))
        expect(page.locator("#cite-model")).to_have_text("2 · 1 dropped")
        expect(page.locator("#cite-attributed")).to_have_text(str(figures["attributed"]))
        expect(page.locator("#cite-supported")).to_have_text("100%")
        expect(page.locator("#cite-unsupported")).to_have_text("1")
        expect(page.locator("#citations-note")).to_have_text("from 2 source files")

        # the document's markers link to its References inside the page, the run stays chosen
        cite = page.locator("#document a.cite").first
        expect(cite).to_have_text("1")
        cite.click()
        expect(page.locator("#doc-ref-1")).to_be_in_viewport()
        expect(page.locator("#doc-ref-1")).to_contain_text("[1] docs/trams.md")
        assert page.evaluate("location.hash") == f"#run={run_id}"
        expect(page.locator("#run-view")).to_be_visible()
        browser.close()
    assert errors == []
