"""The runs API's part of /openapi.json (routes.py's routes): each operation with its
request, its answers and every error status it can give."""

from __future__ import annotations

from typing import Any

from gen.server.openapi import error_answers, json_answer, ref
from gen.server.runs.models import EVENT_TYPES

ERRORS = {
    "400": "Invalid request: the message names the parameter",
    "401": "Missing or wrong API key",
    "404": "No such run",
    "408": "The request body stalled before its end (gen serve --body-timeout)",
    "409": "The run is not in a state that allows this (the message says which)",
    "413": "Request body too large",
    "415": "The request's Content-Type is not application/json",
    "422": "The pipeline or its inputs do not validate (the message points into the YAML)",
    "429": "The run queue (or, for an event stream, the places for streams) is full; retry "
    "after Retry-After seconds",
}
_RUN_ID = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "description": "a run's id (as POST /v1/runs answers or GET /v1/runs lists)",
    "schema": {"type": "string"},
}
# one event as Open API before 3.2 describes an event stream: `data` is the event's JSON
_RUN_EVENT = {
    "type": "object",
    "required": ["data", "event", "id"],
    "properties": {
        "event": {"enum": list(EVENT_TYPES)},
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "the event's seq"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "retry": {"type": "integer"},
    },
}
_EVENTS = {"schema": _RUN_EVENT}
_JSON_BODY = {
    "required": False,
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def _text(media_types: tuple[str, ...], description: str) -> dict[str, Any]:
    string = {"schema": {"type": "string"}}
    return {"description": description, "content": {m: string for m in media_types}}


def _operation(
    summary: str,
    responses: dict[str, Any],
    errors: tuple[str, ...],
    *,
    body: dict[str, Any] | None = None,
    run_id: bool = True,
    more: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    answers = {**responses, **error_answers(errors, ERRORS)}
    operation: dict[str, Any] = {"summary": summary, "responses": answers}
    parameters = [*([_RUN_ID] if run_id else []), *more]
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = body
    return operation


def runs_paths() -> dict[str, Any]:
    """The paths; the caller adds 401 where a key is needed."""
    events = _operation(
        "The run's events as Server-Sent Events: those so far after Last-Event-ID, then "
        "live ones; the stream ends when the run is over",
        {"200": {"description": "Events", "content": {"text/event-stream": _EVENTS}}},
        ("400", "404", "429"),
        more=(
            {
                "name": "last_event_id",
                "in": "query",
                "description": "resume after this event's seq (a new EventSource)",
                "schema": {"type": "integer", "minimum": 0},
            },
            {
                "name": "Last-Event-ID",
                "in": "header",
                "description": "resume after this event's seq (an EventSource reconnecting)",
                "schema": {"type": "string", "pattern": "^[0-9]*$"},
            },
        ),
    )
    document = _operation(
        "The finished document: Markdown, or one HTML page when Accept prefers text/html",
        {"200": _text(("text/markdown", "text/html"), "The document")},
        ("404", "409"),
    )
    cancel = _operation(
        "Cancel a queued or running run (finished sections are kept)",
        {"200": json_answer("RunAction", "The run, cancelled")},
        ("404", "408", "409", "413", "415"),
        body=_JSON_BODY,
    )
    resume = _operation(
        "Resume a run this server started that failed, was cancelled or was interrupted",
        {"200": json_answer("RunAction", "The run, queued again")},
        ("404", "408", "409", "413", "415", "429"),
        body=_JSON_BODY,
    )
    created = json_answer("RunCreated", "The run, queued")
    created["headers"] = {
        "Location": {"description": "the run's URL", "schema": {"type": "string"}}
    }
    create = _operation(
        "Start a pipeline run",
        {"201": created},
        ("400", "408", "413", "415", "422", "429"),
        body={"required": True, "content": {"application/json": {"schema": ref("CreateRun")}}},
        run_id=False,
    )
    return {
        "/v1/pipelines": {
            "get": _operation(
                "The pipelines a run may name, with their inputs",
                {"200": json_answer("PipelineList", "The pipelines folder's pipelines")},
                (),
                run_id=False,
            )
        },
        "/v1/runs": {
            "post": create,
            "get": _operation(
                "Every run in the outputs folder, this server's and `gen run`'s",
                {"200": json_answer("RunList", "The runs, newest first")},
                (),
                run_id=False,
            ),
        },
        "/v1/runs/{run_id}": {
            "get": _operation(
                "A run's manifest so far",
                {"200": json_answer("RunManifest", "The manifest")},
                ("404",),
            )
        },
        "/v1/runs/{run_id}/events": {"get": events},
        "/v1/runs/{run_id}/document": {"get": document},
        "/v1/runs/{run_id}/timeline.svg": {
            "get": _operation(
                "The run's timeline: a section per row, its rounds as bars",
                {"200": _text(("image/svg+xml",), "The timeline")},
                ("404",),
            )
        },
        "/v1/runs/{run_id}/cancel": {"post": cancel},
        "/v1/runs/{run_id}/resume": {"post": resume},
    }
