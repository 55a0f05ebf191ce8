"""The OpenAPI 3.1 document at /openapi.json, made from the pydantic models of the requests
(openai_api, runs_models) and responses (openai_responses, runs_models); openapi_runs has
the runs API's paths."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import gen
from gen.server.openai import requests as req
from gen.server.openai import responses as res
from gen.server.runs.models import RESPONSES as RUN_MODELS
from gen.server.runs.openapi import runs_paths

_MODELS: tuple[type[BaseModel], ...] = (
    req.ChatCompletionRequest,
    req.CompletionRequest,
    res.ChatCompletion,
    res.ChatCompletionChunk,
    res.Completion,
    res.ModelList,
    res.ErrorResponse,
    res.Health,
    *RUN_MODELS,
)
_ERRORS = {
    "400": "Invalid request: the message names the parameter",
    "401": "Missing or wrong API key",
    "404": "No such model",
    "408": "The request body stalled before its end (gen serve --body-timeout)",
    "413": "Request body too large",
    "429": "Queue full; retry after Retry-After seconds",
    "500": "Generation failed",
}


# OpenAPI 3.1: an event stream's schema describes each event; data is a chunk's JSON, an
# error's JSON, or [DONE]
_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(codes: tuple[str, ...]) -> dict[str, Any]:
    errors = {code: _json("ErrorResponse", _ERRORS[code]) for code in codes}
    if "429" in errors:
        errors["429"]["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}
        }
    return errors


def _generation(request: str, response: str, summary: str) -> dict[str, Any]:
    codes = ("400", "404", "408", "413", "429", "500")
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(request)}},
            },
            "responses": {
                "200": {
                    "description": f"A {response}, or with stream=true Server-Sent Events: "
                    f"data: lines of chunks, then data: [DONE]",
                    "content": {
                        "application/json": {"schema": _ref(response)},
                        "text/event-stream": {"schema": _EVENT},
                    },
                },
                **_errors(codes),
            },
        }
    }


def _at_most(schema: dict[str, Any], limit: int) -> None:
    """An optional integer field's schema (`anyOf: [integer, null]`) with a maximum."""
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            option["maximum"] = limit


def openapi_document(
    model: str, auth: bool, *, window: int | None = None, runs: bool = False
) -> dict[str, Any]:
    """`model`: the one model served (the only value requests may name); `auth`: whether
    /v1/* needs a bearer key; `window`: its context window (no max_tokens past it);
    `runs`: whether the server runs pipelines (the runs API)."""
    _, top = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    schemas: dict[str, Any] = top["$defs"]
    for request in ("ChatCompletionRequest", "CompletionRequest"):
        properties = schemas[request]["properties"]
        properties["model"] = {"type": "string", "enum": [model]}
        for name in ("max_tokens", "max_completion_tokens"):
            if window is not None and name in properties:
                _at_most(properties[name], window)
    text = {
        "description": "Prometheus text",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "gen serve", "version": gen.__version__},
        "paths": {
            "/v1/models": {
                "get": {
                    "summary": "The model served",
                    "responses": {
                        "200": _json("ModelList", "The one model this server serves"),
                    },
                }
            },
            "/v1/chat/completions": _generation(
                "ChatCompletionRequest", "ChatCompletion", "Chat completion"
            ),
            "/v1/completions": _generation("CompletionRequest", "Completion", "Text completion"),
            "/health": {"get": {"responses": {"200": _json("Health", "The server is up")}}},
            "/metrics": {"get": {"responses": {"200": text}}},
            "/v1/session": {
                "post": {
                    "summary": "Set the dashboard's session cookie (HttpOnly): a browser's "
                    "GET requests then need no Authorization header",
                    "responses": {"204": {"description": "The cookie is set (with a key)"}},
                }
            },
            **(runs_paths() if runs else {}),
            "/openapi.json": {
                "get": {
                    "responses": {
                        "200": {
                            "description": "This document",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    }
                }
            },
        },
        "components": {"schemas": schemas},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path, item in doc["paths"].items():
            if path.startswith("/v1/"):
                for operation in item.values():
                    operation["security"] = [{"bearer": []}]
                    operation["responses"] |= _errors(("401",))
    return doc
