"""The dashboard at / in a real browser: headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright; `make install` gets it, nothing is downloaded) on a real `gen serve`.
A run is started from the form, its text appears live, the event stream is dropped once
mid-run, and at the end each section's text on the page equals the section on disk. A
run with failed sections (written beside it by a scripted backend) shows which and why."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.fake_backend import FakeBackend, pipeline_from, run
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
