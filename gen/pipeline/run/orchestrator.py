"""Runs a pipeline: sections as a DAG (independent ones concurrently), fan-outs, resume,
the manifest after every section, and the document at the end."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import time
import traceback
from typing import Any

from gen import __version__
from gen.errors import ContextOverflowError, GenError
from gen.export import ExportError, export_document
from gen.pipeline.run.budget import Fitted
from gen.pipeline.run.citing import Shown, document_citations, references_block
from gen.pipeline.run.events import EventLog, process_start
from gen.pipeline.run.manifest import SectionRecord, failed, run_metrics
from gen.pipeline.run.rundir import RunDir
from gen.pipeline.run.section import RunContext, SectionRun
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import (
    document_title,
    render_document,
    render_lengths,
    render_title,
)
from gen.pipeline.templates.variables import (
    SectionResult,
    foreach_items,
    prompt_variables,
    with_texts,
)
from gen.sources import Scored
from gen.text.coherence import OutlineCheck, check_outline, section_overlap
from gen.text.conclusion import concludes
from gen.text.listparse import item_title
from gen.text.words import count_words, length_score


def derive_seed(seed: int | None, key: str) -> int | None:
    """The seed of one section or fan-out instance: the pipeline's seed and its key, so
    instances with the same settings still sample differently (None stays None)."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def sibling_titles(items: list[Any], index: int, document: str = "") -> tuple[str, ...]:
    """The other items' titles, for fan-out instance `index` (1-based), and the document's
    title: a part ends where it starts one of them as a heading (or the article over)."""
    titles = [item_title(item) for i, item in enumerate(items, 1) if i != index]
    return tuple(t for t in dict.fromkeys([*titles, document]) if t)


class SectionFailed(Exception):
    """A section (or one it depends on) did not complete; its dependents are skipped."""


def input_hash(fitted: Fitted, settings: dict[str, Any], model: str, title: str) -> str:
    blob = json.dumps(
        {"messages": fitted.messages, "settings": settings, "model": model, "title": title},
        ensure_ascii=False,
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Orchestrator:
    def __init__(
        self,
        ctx: RunContext,
        run: RunDir,
        *,
        model: str,
        previous: dict[str, Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.pipeline: Pipeline = ctx.pipeline
        self.events: EventLog = ctx.events
        self.run_dir = run
        self.model = model
        self.records: dict[str, SectionRecord] = {}
        self.results: dict[str, SectionResult] = {}
        self.previous = {s["id"]: s for s in (previous or {}).get("sections", [])}
        self.status = "running"
        self.cancel_status = (
            "cancelled"  # what a cancel makes of the run (a stopping server: failed)
        )
        self.cancel_note: str | None = None  # said in an error event when a cancel ends it
        self.started = time.monotonic()
        self.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._done: dict[str, asyncio.Future[bool]] = {}
        self.outline: OutlineCheck | None = None  # the document against its outline
        self.citations: dict[str, Any] | None = None  # the document's references (citing.py)
        self.exports: list[str] = []  # document.<ext> files written beside document.md

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        self.events.emit(
            "run_started",
            pipeline=self.pipeline.name,
            model=self.model,
            backend=self.ctx.backend.name,
            sections=[s.id for s in self.pipeline.sections],
            window=self.ctx.window,
            resumed=bool(self.previous),
            pid=os.getpid(),  # who writes the run: `gen serve` can stop a `gen run` it shows
            host=socket.gethostname(),
            pid_start=process_start(os.getpid()),
        )
        self._save()  # the run is on disk as running from its first moment
        loop = asyncio.get_running_loop()
        self._done = {s.id: loop.create_future() for s in self.pipeline.sections}
        tasks = [asyncio.create_task(self._section(s)) for s in self.pipeline.sections]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # their streams close: KV freed
                await asyncio.gather(*tasks, return_exceptions=True)
            self.status = self.cancel_status
            if self.cancel_note:
                self.events.emit("error", message=self.cancel_note)
            for rec in self.records.values():
                if rec.status in ("pending", "running"):
                    rec.status = "cancelled"
            self._finish()
            raise
        ok = all(r.status == "completed" for r in self.records.values()) and len(
            {r.section for r in self.records.values()}
        ) == len(self.pipeline.sections)
        if ok:
            try:
                document = self._document()
                self.run_dir.write_document(document)
            except GenError as exc:
                self.events.emit("error", message=str(exc))
                ok = False
            else:
                self._check_coherence(document)
                self._export()
        self.status = "completed" if ok else "failed"
        return self._finish()

    def _document(self) -> str:
        """The document from the finished sections; where they were shown passages, their
        markers made the document's numbers and the References after it."""
        library = self.pipeline._library
        cited = [
            r
            for r in self._ordered()
            if r.status == "completed" and r.shown and self.pipeline.section(r.section).in_document
        ]
        if not library or not cited or self.pipeline.citations == "off":
            return render_document(self.pipeline, self.results)
        texts, references, self.citations = document_citations([(r.text, r.shown) for r in cited])
        renumbered = {r.key: text for r, text in zip(cited, texts, strict=True)}
        document = render_document(self.pipeline, with_texts(self.results, renumbered))
        block = references_block(references, document)
        return f"{document.rstrip()}\n\n{block}" if block else document

    def _export(self) -> None:
        """The document in the pipeline's other formats, beside document.md; one that fails
        (a PDF engine missing, say) is an error event, and the run keeps its document."""
        formats = [f for f in self.pipeline.document.formats if f != "md"]
        if not formats:
            return
        try:
            written = export_document(self.run_dir.path, formats)
        except ExportError as exc:
            self.events.emit("error", message=f"export: {exc}")
            return
        self.exports = [p.name for p in written]  # in the manifest

    def _check_coherence(self, document: str) -> None:
        """Each section's overlap with the sections before it in the document, and the
        document's headings against the outline a fan-out ran over."""
        earlier: list[str] = []
        for rec in self._ordered():
            section = self.pipeline.section(rec.section)
            if rec.status != "completed" or not section.in_document:
                continue
            rec.overlap = section_overlap(rec.text, earlier)
            earlier.append(rec.text)
        outlines = {
            target[1]
            for s in self.pipeline.sections
            if s.in_document and (target := s.foreach_target()) and target[0] == "sections"
        }
        items = [
            item_title(item)
            for rec in self._ordered()
            if rec.section in outlines
            for item in rec.items
        ]
        self.outline = check_outline(document, items) if outlines else None

    def _finish(self) -> dict[str, Any]:
        manifest = self.manifest()
        self.run_dir.write_manifest(manifest)
        self.events.emit(
            "run_finished",
            status=self.status,
            metrics=manifest["metrics"],
            document=str(self.run_dir.document_path) if manifest["document"] else None,
        )
        return manifest

    async def _section(self, section: Section) -> None:
        done = self._done[section.id]
        try:
            for dep in section.depends_on:
                if not await asyncio.shield(self._done[dep]):
                    raise SectionFailed(f"skipped: {dep!r} did not complete")
            if section.foreach:
                result = await self._fan_out(section)
            else:
                result = await self._instance(section, section.id)
            self.results[section.id] = result
            done.set_result(True)
        except SectionFailed as exc:
            if section.id not in {r.section for r in self.records.values()}:
                rec = SectionRecord(section.id, section.id, section.id, status="skipped")
                rec.error = str(exc)
                self.records[section.id] = rec
                self._save()
            done.set_result(False)
        except asyncio.CancelledError:
            if not done.done():
                done.set_result(False)
            raise

    async def _fan_out(self, section: Section) -> SectionResult:
        try:
            items = foreach_items(self.pipeline, section, self.results)
        except (KeyError, TypeError) as exc:
            raise self._fail_early(section, f"foreach: cannot get items: {exc}") from exc
        if not items:
            raise self._fail_early(section, f"foreach: {section.foreach} has no items")
        n, title = len(items), self._title()
        parts: list[SectionResult] = []
        if "previous" in section.context:  # each instance sees the one before: in order
            previous, written = None, 0
            for i, item in enumerate(items, 1):
                part = await self._instance(
                    section, f"{section.id}-{i}", item, i, n, previous,
                    sibling_titles(items, i, title), written,
                )  # fmt: skip
                parts.append(part)
                previous, written = part.text, written + count_words(part.text)
        else:
            outcomes = await asyncio.gather(
                *(
                    self._instance(
                        section,
                        f"{section.id}-{i}",
                        item,
                        i,
                        n,
                        siblings=sibling_titles(items, i, title),
                    )
                    for i, item in enumerate(items, 1)
                ),
                return_exceptions=True,  # one failed instance must not orphan the others
            )
            failed = [o for o in outcomes if isinstance(o, BaseException)]
            if failed:
                raise failed[0]
            parts = [o for o in outcomes if isinstance(o, SectionResult)]
        return SectionResult.fan_in(section.id, parts, section.id.replace("_", " ").capitalize())

    def _title(self) -> str:
        try:
            return document_title(self.pipeline)
        except GenError:
            return ""

    def _fail_early(self, section: Section, message: str) -> SectionFailed:
        rec = SectionRecord(section.id, section.id, section.id, status="failed", error=message)
        rec.reasons.append("error")
        self.records[section.id] = rec
        self.events.emit("error", message=message, section=section.id)
        self._save()
        return SectionFailed(message)

    async def _instance(
        self,
        section: Section,
        key: str,
        item: Any = None,
        index: int = 1,
        count: int = 1,
        previous: str | None = None,
        siblings: tuple[str, ...] = (),
        written: int = 0,
    ) -> SectionResult:
        rec = SectionRecord(key, section.id, key)
        self.records[key] = rec
        try:
            variables = prompt_variables(
                self.pipeline,
                section,
                self.results,
                item=item,
                loop_index=index,
                loop_length=count,
                previous=previous,
                written=written,
            )
            rec.title = render_title(self.pipeline, section, variables)
            lengths = render_lengths(self.pipeline, section, variables)
            rec.target_words = lengths[0]
            settings = self.pipeline.settings_for(section)
            rec.seed = derive_seed(settings.seed, key)
            runner = SectionRun(
                self.ctx,
                section,
                rec,
                variables,
                seed=rec.seed,
                siblings=siblings,
                lengths=lengths,
                earlier=self._earlier_texts(section, key),
                concluded_later=self._concluded_later(section),
            )
            first = runner.first_prompt()
            hashed = {
                **settings.model_dump(mode="json"),
                "max_rounds": runner.rules.max_rounds,  # as set, or as planned for the target
                "seed": rec.seed,
                "siblings": list(siblings),
                "lengths": lengths,
                "headings": section.headings,
                "constraint": runner.describe_constraint(),
            }
            model = self.model
            if self.ctx.backend.dtype not in (None, "float32"):
                model = f"{model} ({self.ctx.backend.dtype})"  # other weights, other text
            rec.input_hash = input_hash(first, hashed, model, rec.title)
            if not self._reuse(rec):
                rec.status = "running"
                self.events.emit(
                    "section_started",
                    section=key,
                    title=rec.title,
                    target_words=rec.target_words,
                    prompt_tokens=first.prompt_tokens,
                    trimmed_tokens=first.trimmed_tokens,
                    cached=False,
                )
                if runner.library:
                    passages = [p.to_json() for p in runner.shown]
                    self.events.emit("sources", section=key, passages=passages)
                try:
                    await runner.run(first)
                finally:
                    if runner.requests:
                        self.run_dir.write_prompts(key, runner.requests)
                if section.parse != "text":
                    rec.items = runner.items()
                self.run_dir.write_section(key, rec.text)
                rec.status = "completed"
                self.events.emit("section_finished", **self._summary(rec))
        except asyncio.CancelledError:
            rec.status = "cancelled"
            raise
        except Exception as exc:  # GenError, or a backend's own: the section fails, not the run
            message = str(exc) if isinstance(exc, GenError) else f"{type(exc).__name__}: {exc}"
            rec.status, rec.error = "failed", message
            rec.reasons.append("error")
            detail = {} if isinstance(exc, GenError) else {"traceback": traceback.format_exc()}
            self.events.emit("error", message=message, section=key, **detail)
            self._save()
            raise SectionFailed(message) from exc
        self._save()
        return SectionResult(key, rec.text, rec.items, rec.title)

    def _concluded_later(self, section: Section) -> bool:
        """Is a later section of the document its conclusion (its id or title says so:
        `conclusion`, "Conclusion", 结语)?"""
        sections = self.pipeline.sections
        later = sections[sections.index(section) + 1 :]
        return any(
            s.in_document and any(concludes(f"## {name}") for name in (s.id, s.title or ""))
            for s in later
        )

    def _earlier_texts(self, section: Section, key: str) -> list[str]:
        """The sections before `key` in the document that are sure to be finished when it
        starts, whatever ran when: those it depends on, and a fan-out's earlier parts when
        each sees the one before. (So the same seed gives the same text in every run.)"""
        needed, todo = set(), list(section.depends_on)
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(self.pipeline.section(name).depends_on)
        if "previous" in section.context:
            needed.add(section.id)
        earlier = []
        for rec in self._ordered():
            if rec.key == key:
                break
            wanted = rec.section in needed and self.pipeline.section(rec.section).in_document
            if wanted and rec.status == "completed":
                earlier.append(rec.text)
        return earlier

    def _reuse(self, rec: SectionRecord) -> bool:
        """Resume: a finished section with the same inputs is taken from disk as it is."""
        old = self.previous.get(rec.key)
        if not old or old.get("status") != "completed" or old.get("input_hash") != rec.input_hash:
            return False
        text = self.run_dir.read_section(rec.key)
        if text is None:
            return False
        saved = SectionRecord.from_json(old, text)
        rec.text, rec.items, rec.rounds = text, saved.items, saved.rounds
        rec.words, rec.length_score, rec.truncated = (
            saved.words,
            saved.length_score,
            saved.truncated,
        )
        rec.degenerate, rec.distinct_4 = saved.degenerate, saved.distinct_4
        rec.repeated_sentences, rec.reasons = saved.repeated_sentences, saved.reasons
        rec.length_plan = saved.length_plan or rec.length_plan  # as it turned out
        rec.citing = saved.citing
        rec.shown = self._shown_again(rec.section, old.get("passages") or [])
        rec.status, rec.cached = "completed", True
        self.events.emit(
            "section_started",
            section=rec.key,
            title=rec.title,
            target_words=rec.target_words,
            cached=True,
        )
        self.events.emit("section_finished", **self._summary(rec))
        return True

    def _shown_again(self, section: str, passages: list[dict[str, Any]]) -> list[Shown]:
        """A resumed section's passages, found again by id and score in the library (the
        same passages: its input hash covers the prompt that carried them)."""
        library = self.pipeline._library
        if not library or not passages:
            return []
        by_id = {p.id: p for p in library.passages_for(section)}
        return [
            Shown.of(Scored(by_id[p["id"]], float(p.get("score", 0.0)), i))
            for i, p in enumerate(passages)
            if p.get("id") in by_id
        ]

    # -- reporting ------------------------------------------------------------------------

    def _summary(self, rec: SectionRecord) -> dict[str, Any]:
        return {
            "section": rec.key,
            "status": rec.status,
            "cached": rec.cached,
            "words": rec.words,
            "target_words": rec.target_words,
            "length_score": None if rec.length_score is None else round(rec.length_score, 1),
            "rounds": len(rec.rounds),
            "truncated": rec.truncated,
            "degenerate": rec.degenerate,
            "failed": failed(rec),
            "reasons": rec.reasons,
            "distinct_4": round(rec.distinct_4, 3),
            "repeated_sentences": round(rec.repeated_sentences, 3),
            "finish_reason": rec.rounds[-1].finish_reason if rec.rounds else None,
            "ended_by": rec.ended_by,
            "items": rec.items,  # what a fan-out over this section will run over
            "citing": rec.citing,  # its citations' figures (citing.Cited); None without sources
        }

    def _ordered(self) -> list[SectionRecord]:
        order = {s.id: i for i, s in enumerate(self.pipeline.sections)}

        def key(r: SectionRecord) -> tuple[int, int]:
            tail = r.key.rsplit("-", 1)[-1] if r.key != r.section else "0"
            return order.get(r.section, 0), int(tail) if tail.isdigit() else 0

        return sorted(self.records.values(), key=key)

    def manifest(self) -> dict[str, Any]:
        records = self._ordered()
        seconds = time.monotonic() - self.started
        scored = [r for r in records if r.target_words and r.status == "completed"]
        doc_score = None
        if scored:
            target = sum(r.target_words or 0 for r in scored)
            doc_score = round(length_score(target, max(1, sum(r.words for r in scored))), 1)
        document = self.run_dir.document_path
        pipeline = self.pipeline
        return {
            "pipeline": pipeline.name,
            "pipeline_file": pipeline.file,
            "pipeline_sha256": hashlib.sha256(pipeline.source_text.encode("utf-8")).hexdigest(),
            "gen_version": __version__,
            "run_id": self.run_dir.run_id,
            "status": self.status,
            "model": self.model,
            "backend": self.ctx.backend.name,
            "dtype": self.ctx.backend.dtype,
            "created": self.created,
            "inputs": self.pipeline.inputs,
            "context": {"window": self.ctx.window, "reserve": self.ctx.reserve},
            "document": document.name
            if document.is_file() and self.status == "completed"
            else None,
            "exports": self.exports,
            "document_words": count_words(document.read_text("utf-8")) if document.is_file() else 0,
            "length_score": doc_score,
            "settings": {
                s.id: pipeline.settings_for(s).model_dump(mode="json") for s in pipeline.sections
            },
            "sections": [r.to_json() for r in records],
            "metrics": run_metrics(records, self.ctx.window, seconds, self.outline),
            **self._sources_json(records),
        }

    def _sources_json(self, records: list[SectionRecord]) -> dict[str, Any]:
        """The manifest's `sources` (every file: path, kind, hash, passages) and `citations`
        (the document's: references, the model's markers kept and dropped, gen's own, and
        the share of the model's cited sentences their passages bear out)."""
        library = self.pipeline._library
        if not library or not library.documents:
            return {}
        figures = [r.citing for r in records if r.citing]
        sentences = sum(f["cited_sentences"] for f in figures)
        supported = sum(
            f["supported_share"] * f["cited_sentences"] for f in figures if f["supported_share"]
        )
        citations = {
            **(self.citations or {}),
            "model_citations": sum(f["citations"] for f in figures),
            "citations_dropped": sum(f["citations_dropped"] for f in figures),
            "attributed": sum(f["attributed"] for f in figures),
            "cited_sentences": sentences,
            "supported_share": round(supported / sentences, 3) if sentences else None,
            "unsupported_facts": sum(f["unsupported_count"] for f in figures),
        }
        return {"sources": library.to_json(), "citations": citations}

    def _save(self) -> None:
        self.run_dir.write_manifest(self.manifest())


def preflight(ctx: RunContext) -> None:
    """Before any generation: sections that need nothing upstream must fit their
    instructions into the budget; a ConfigError at the prompt names the numbers."""
    pipeline = ctx.pipeline
    smap = pipeline._templates.smap
    for index, section in enumerate(pipeline.sections):
        if section.depends_on or section.foreach:
            continue
        variables = prompt_variables(pipeline, section, {})
        try:
            SectionRun(
                ctx, section, SectionRecord(section.id, section.id, ""), variables
            ).first_prompt()
        except ContextOverflowError as exc:
            field = "prompt" if section.prompt is not None else "template"
            raise smap.error(("sections", index, field), str(exc)) from None
