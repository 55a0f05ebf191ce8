"""`gen batch`: one run of a pipeline per record, all through one shared backend (so the
engine's continuous batching stays full), at most `concurrency` documents in flight.
Each record gets its own run directory under the batch's folder; batch.json and batch.csv
say, per record, how it went, and are rewritten (atomically) as each record ends. Running
the same batch again finishes what is left: a record whose run completed from the same
fields and pipeline is not touched."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gen.backends.base import Backend
from gen.errors import ConfigError, GenError
from gen.files import atomic_write
from gen.pipeline import Pipeline, load_pipeline
from gen.pipeline.records import Record
from gen.pipeline.run.events import Event
from gen.pipeline.run.manifest import SectionRecord, failed, failed_reasons
from gen.pipeline.run.runner import prepare_run
from gen.pipeline.templates.trial import trial_render

COLUMNS = (
    "key", "line", "status", "sections_failed", "failed_reasons", "words", "length_score",
    "rounds", "tokens", "seconds", "references", "citations", "attributed", "supported_share",
    "unsupported_facts", "error",
)  # fmt: skip


@dataclass(slots=True)
class RecordResult:
    key: str
    line: int
    status: str = "pending"  # pending | running | completed | failed | cancelled
    sections_failed: int = 0  # degenerate, truncated short of a target, or an error
    failed_reasons: dict[str, int] = field(default_factory=dict)  # per reason, as in metrics
    words: int = 0
    length_score: float | None = None
    rounds: int = 0
    tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    # with sources: the document's references, the model's citations kept, gen's own, the
    # share of the model's cited sentences their passages bear out, sentences with a figure
    # or name no passage holds (the manifest's `citations`)
    references: int | None = None
    citations: int | None = None
    attributed: int | None = None
    supported_share: float | None = None
    unsupported_facts: int | None = None
    reused: bool = False  # completed by an earlier run of the batch, left as it was
    run_dir: str = ""


def record_hash(fields: Mapping[str, Any], pipeline: Pipeline) -> str:
    """What a record's finished run was made from: its fields and the pipeline's text."""
    blob = json.dumps(
        {"fields": fields, "pipeline": pipeline.source_text}, ensure_ascii=False, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Batch:
    def __init__(
        self,
        pipeline_file: Path,
        records: list[Record],
        records_file: str,
        folder: Path,
        *,
        backend: Backend | None = None,  # set once the model has loaded (not for check())
        model: str,
        concurrency: int = 4,
        overrides: Mapping[str, str] | None = None,
        key_field: str | None = None,
        on_event: Callable[[RecordResult, Event], None] | None = None,
        on_record: Callable[[RecordResult], None] | None = None,
    ) -> None:
        self.pipeline_file = pipeline_file
        self.records = records
        self.records_file = records_file
        self.backend = backend
        self.folder = folder
        self.model = model
        self.concurrency = concurrency
        self.overrides = dict(overrides or {})
        self.key_field = key_field  # names the folders; an input only if the pipeline has it
        self.on_event = on_event
        self.on_record = on_record
        self.results = {r.key: RecordResult(r.key, r.line) for r in records}
        self._inputs: set[str] | None = None
        self._check: tuple[dict[str, str], dict[str, str]] | None = None
        self.started = time.monotonic()
        self.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    # -- checking, before a model loads ----------------------------------------------------

    def load(self, record: Record) -> Pipeline:
        """The pipeline with this record's fields as its inputs, its templates tried with
        them (ConfigError naming the record's line when a field is wrong)."""
        if record.error is not None:
            raise ConfigError(f"{record.where(self.records_file)}: {record.error}")
        fields = dict(record.fields)
        if self.key_field is not None and self.key_field not in self._declared():
            fields.pop(self.key_field, None)
        try:
            pipeline = load_pipeline(self.pipeline_file, {**self.overrides, **fields})
            trial_render(pipeline)  # what its templates would refuse with these fields
            return pipeline
        except ConfigError as exc:
            message = exc.message.replace("--set ", "", 1)
            raise ConfigError(f"{record.where(self.records_file)}: {message}") from None

    def _declared(self) -> set[str]:
        if self._inputs is None:
            self._inputs = set(load_pipeline(self.pipeline_file, self.overrides).inputs)
        return self._inputs

    def check(self) -> dict[str, str]:
        """Every record's problem that shows without a model: key -> message."""
        return self._checked()[0]

    def remaining(self) -> list[Record]:
        """The records a run of the batch would generate: not finished before, as they are
        (a record with a problem fails without a model)."""
        hashes = self._checked()[1]
        return [
            r
            for r in self.records
            if r.key in hashes
            and self._finished_manifest(self.folder / r.key, hashes[r.key]) is None
        ]

    def _checked(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each record loaded once (about 20 ms each): its problem, or its fields' hash."""
        if self._check is None:
            problems, hashes = {}, {}
            for record in self.records:
                try:
                    hashes[record.key] = record_hash(record.fields, self.load(record))
                except ConfigError as exc:
                    problems[record.key] = str(exc)
            self._check = problems, hashes
        return self._check

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> list[RecordResult]:
        # a batch killed while it wrote its ledger leaves the write's temp file beside it (the
        # records' own folders clear theirs when they resume)
        if self.folder.is_dir():
            for stale in self.folder.glob(".*.tmp"):
                stale.unlink(missing_ok=True)
        places = asyncio.Semaphore(self.concurrency)

        async def one(record: Record) -> None:
            async with places:
                await self._record(record)

        tasks = [asyncio.create_task(one(r)) for r in self.records]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for result in self.results.values():
                if result.status in ("pending", "running"):
                    result.status = "cancelled"
            self.write_ledger()
        return list(self.results.values())

    async def _record(self, record: Record) -> None:
        result = self.results[record.key]
        path = self.folder / record.key
        result.run_dir = str(path)
        try:
            fields_hash = self._checked()[1].get(record.key)  # None: it cannot load
            finished = self._finished_manifest(path, fields_hash) if fields_hash else None
            if finished is not None:
                self._from_manifest(result, finished)
                result.reused = True
                if self.on_record is not None:
                    self.on_record(result)
                return
            pipeline = self.load(record)  # (a record with a problem fails here, named)
            fields_hash = fields_hash or record_hash(record.fields, pipeline)
            if self.backend is None:
                raise GenError("the batch has no backend to generate with")
            result.status = "running"
            prepared = prepare_run(
                pipeline,
                self.backend,
                self.folder,
                model=self.model,
                resume=True,
                path=path,
                subscribers=(lambda ev: self._event(result, ev),),
            )
            atomic_write(path / "record.json", _record_json(record, fields_hash))
            manifest = await prepared.execute()
            self._from_manifest(result, manifest)
        except GenError as exc:
            result.status, result.error = "failed", str(exc)
        except asyncio.CancelledError:
            result.status = "cancelled"
            raise
        except Exception as exc:  # a record must not take the batch down with it
            result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
        self.write_ledger()
        if self.on_record is not None:
            self.on_record(result)

    def _event(self, result: RecordResult, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(result, event)

    def _finished_manifest(self, path: Path, fields_hash: str) -> dict[str, Any] | None:
        """The manifest of a record's run that completed from these fields, else None."""
        try:
            manifest = json.loads((path / "manifest.json").read_text("utf-8"))
            saved = json.loads((path / "record.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        finished = (
            isinstance(manifest, dict)
            and manifest.get("status") == "completed"
            and isinstance(saved, dict)
            and saved.get("hash") == fields_hash
            and (path / "document.md").is_file()
        )
        return manifest if finished else None

    def _from_manifest(self, result: RecordResult, manifest: dict[str, Any]) -> None:
        sections = manifest.get("sections", [])
        metrics = manifest.get("metrics", {})
        result.status = manifest.get("status", "failed")
        result.words = int(metrics.get("words", 0))
        result.length_score = manifest.get("length_score")
        result.rounds = sum(len(s.get("rounds", [])) for s in sections)
        result.tokens = int(metrics.get("completion_tokens", 0))
        result.seconds = float(metrics.get("seconds", 0.0))
        cited = manifest.get("citations")
        if isinstance(cited, dict):
            result.references = cited.get("references")
            result.citations = cited.get("model_citations")
            result.attributed = cited.get("attributed")
            result.supported_share = cited.get("supported_share")
            result.unsupported_facts = cited.get("unsupported_facts")
        if "sections_failed" in metrics:
            result.sections_failed = int(metrics["sections_failed"])
            result.failed_reasons = dict(metrics.get("failed_reasons", {}))
        else:  # a run written before failed sections were counted
            records = [SectionRecord.from_json(s, "") for s in sections]
            result.sections_failed = sum(failed(r) for r in records)
            result.failed_reasons = failed_reasons(records)
        if result.status != "completed":
            errors = [f"{s['id']}: {s['error']}" for s in sections if s.get("error")]
            result.error = "; ".join(errors) or f"the run ended {result.status}"

    # -- the ledger -------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        results = list(self.results.values())
        counts: dict[str, int] = {}
        for r in results:
            counts[r.status] = counts.get(r.status, 0) + 1
        return {
            "batch_id": self.folder.name,
            "pipeline": str(self.pipeline_file),
            "records_file": self.records_file,
            "model": self.model,
            "created": self.created,
            "concurrency": self.concurrency,
            "counts": counts,
            "sections_failed": sum(r.sections_failed for r in results),
            "seconds": round(time.monotonic() - self.started, 3),
            "records": [asdict(r) for r in results],
        }

    def write_ledger(self) -> None:
        atomic_write(
            self.folder / "batch.json",
            json.dumps(self.summary(), ensure_ascii=False, indent=2) + "\n",
        )
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(COLUMNS)
        for r in self.results.values():
            row = asdict(r)
            row["failed_reasons"] = ";".join(f"{k}={n}" for k, n in r.failed_reasons.items())
            writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
        atomic_write(self.folder / "batch.csv", buffer.getvalue())


def _record_json(record: Record, fields_hash: str) -> str:
    body = {"key": record.key, "line": record.line, "fields": record.fields, "hash": fields_hash}
    return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
