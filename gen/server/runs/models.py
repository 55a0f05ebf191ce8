"""The runs API's bodies as pydantic models: the request POST /v1/runs reads, and the
answers /openapi.json publishes for /v1/runs and /v1/pipelines (runs.py builds them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RUN_STATUSES = "queued, running, completed, failed or cancelled"
EVENT_TYPES = (
    "run_started",
    "section_started",
    "delta",
    "round_finished",
    "section_finished",
    "error",
    "run_finished",
)


class CreateRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pipeline: str = Field(
        min_length=1,
        description="the name of a pipeline in the server's pipelines folder "
        "(GET /v1/pipelines), or a pipeline's YAML text",
    )
    inputs: dict[str, Any] = Field(
        default_factory=dict, description="values for the pipeline's inputs, by name"
    )


class RunCreated(BaseModel):
    run_id: str
    pipeline: str
    status: Literal["queued", "running"]


class RunAction(BaseModel):
    """What cancel and resume answer: the run and its status now."""

    run_id: str
    status: str | None = Field(description=RUN_STATUSES)


class RunSummary(BaseModel):
    run_id: str
    pipeline: str
    status: str = Field(description=RUN_STATUSES)
    source: Literal["server", "cli"] = Field(description="started here, or by `gen run`")
    created: str
    model: str | None
    words: int
    sections: int
    sections_completed: int
    length_score: float | None
    document: bool = Field(description="whether GET /v1/runs/{run_id}/document has it")


class RunList(BaseModel):
    object: Literal["list"] = "list"
    data: list[RunSummary] = Field(description="newest first")


class RunManifest(BaseModel):
    """A run's manifest.json as written so far (the sections under way included), with its
    status and source; what else it holds grows as the run goes."""

    model_config = ConfigDict(extra="allow")

    status: str = Field(description=RUN_STATUSES)
    source: Literal["server", "cli"]
    run_id: str | None = None
    pipeline: str | None = None
    model: str | None = None
    created: str | None = None
    inputs: dict[str, Any] | None = None
    sections: list[dict[str, Any]] | None = None
    metrics: dict[str, Any] | None = None
    document: str | None = Field(default=None, description="document.md once it is written")


class PipelineInfo(BaseModel):
    name: str
    file: str
    description: str = ""
    inputs: dict[str, Any]
    sections: list[str] = Field(description="the sections' ids")
    error: str | None = Field(description="why the file does not load; null when it does")


class PipelineList(BaseModel):
    object: Literal["list"] = "list"
    data: list[PipelineInfo]


RESPONSES: tuple[type[BaseModel], ...] = (
    CreateRun,
    RunCreated,
    RunAction,
    RunList,
    RunManifest,
    PipelineList,
)
