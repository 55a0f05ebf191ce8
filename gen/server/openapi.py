"""The OpenAPI 3.1 document at /openapi.json, made from the pydantic models of the requests
(openai.requests, runs.models) and responses (openai.responses, runs.models), and the parts
every operation's answers are made of; runs/openapi.py has the runs API's paths."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import gen
from gen.server.openai import requests as req
from gen.server.openai import responses as res
from gen.server.openai import responses_api as api
from gen.server.runs.models import RESPONSES as RUN_MODELS

_MODELS: tuple[type[BaseModel], ...] = (
    req.ChatCompletionRequest,
    req.CompletionRequest,
    res.ChatCompletion,
    res.ChatCompletionChunk,
    res.Completion,
    res.ModelList,
    res.ErrorResponse,
    res.Health,
    api.ResponseRequest,
    api.ResponseObject,
    *api.EVENTS,
    *RUN_MODELS,
)
_ERRORS = {
    "400": "Invalid request: the message names the parameter",
    "401": "Missing or wrong API key",
    "404": "No such model",
    "408": "The request body stalled before its end (gen serve --body-timeout)",
    "413": "Request body too large",
    "415": "The request's Content-Type is not application/json",
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


def ref(name: str) -> dict[str, str]:
    """A schema of the components: one of the pydantic models."""
    return {"$ref": f"#/components/schemas/{name}"}


def json_answer(name: str, description: str) -> dict[str, Any]:
    """An answer whose body is the model `name` as JSON."""
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def error_answers(codes: Iterable[str], descriptions: Mapping[str, str]) -> dict[str, Any]:
    """An operation's error answers, each an ErrorResponse; a 429's says Retry-After."""
    answers = {code: json_answer("ErrorResponse", descriptions[code]) for code in codes}
    if "429" in answers:
        answers["429"]["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}
        }
    return answers


def _generation(
    request: str, response: str, summary: str, events: str = "data: lines of chunks"
) -> dict[str, Any]:
    codes = ("400", "404", "408", "413", "415", "429", "500")
    return {
        "post": {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref(request)}},
            },
            "responses": {
                "200": {
                    "description": f"A {response}, or with stream=true Server-Sent Events: "
                    f"{events}, then data: [DONE]",
                    "content": {
                        "application/json": {"schema": ref(response)},
                        "text/event-stream": {"schema": _EVENT},
                    },
                },
                **error_answers(codes, _ERRORS),
            },
        }
    }


def _at_most(schema: dict[str, Any], limit: int) -> None:
    """An optional integer field's schema (`anyOf: [integer, null]`) with a maximum."""
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            option["maximum"] = limit


def openapi_document(
    model: str,
    auth: bool,
    *,
    window: int | None = None,
    paths: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`model`: the one model served (the only value requests may name); `auth`: whether
    /v1/* needs a bearer key; `window`: its context window (no max_tokens past it);
    `paths`: the runs API's, where the server runs pipelines."""
    _, top = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    schemas: dict[str, Any] = top["$defs"]
    for request in ("ChatCompletionRequest", "CompletionRequest", "ResponseRequest"):
        properties = schemas[request]["properties"]
        properties["model"] = {"type": "string", "enum": [model]}
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
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
                        "200": json_answer("ModelList", "The one model this server serves"),
                    },
                }
            },
            "/v1/models/{model_id}": {
                "get": {
                    "summary": "The model served, by its id",
                    "parameters": [
                        {
                            "name": "model_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": json_answer("ModelCard", "The one model this server serves"),
                        **error_answers(("404",), _ERRORS),
                    },
                }
            },
            "/v1/chat/completions": _generation(
                "ChatCompletionRequest", "ChatCompletion", "Chat completion"
            ),
            "/v1/completions": _generation("CompletionRequest", "Completion", "Text completion"),
            "/v1/responses": _generation(
                "ResponseRequest",
                "ResponseObject",
                "Response (OpenAI's Responses API, stateless)",
                "event: <type> and data: lines of the Responses API's events (StreamEvent's "
                "kinds: response.created … response.completed)",
            ),
            "/health": {"get": {"responses": {"200": json_answer("Health", "The server is up")}}},
            "/metrics": {"get": {"responses": {"200": text}}},
            "/v1/session": {
                "post": {
                    "summary": "Set the dashboard's session cookie (HttpOnly): a browser's "
                    "GET requests then need no Authorization header",
                    "responses": {"204": {"description": "The cookie is set (with a key)"}},
                }
            },
            **(paths or {}),
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
                    operation["responses"] |= error_answers(("401",), _ERRORS)
    return doc
