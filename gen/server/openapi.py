"""The OpenAPI 3.1 document at /openapi.json, made from the pydantic models of the requests
(openai_api) and responses (openai_responses)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import gen
from gen.server import openai_api as req
from gen.server import openai_responses as res

_MODELS: tuple[type[BaseModel], ...] = (
    req.ChatCompletionRequest,
    req.CompletionRequest,
    res.ChatCompletion,
    res.ChatCompletionChunk,
    res.Completion,
    res.ModelList,
    res.ErrorResponse,
    res.Health,
)
_ERRORS = {
    "400": "Invalid request: the message names the parameter",
    "401": "Missing or wrong API key",
    "404": "No such model",
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
    return {code: _json("ErrorResponse", _ERRORS[code]) for code in codes}


def _generation(request: str, response: str, summary: str, auth: bool) -> dict[str, Any]:
    codes = (
        ("400", "401", "404", "413", "429", "500") if auth else ("400", "404", "413", "429", "500")
    )
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


def openapi_document(model: str, auth: bool) -> dict[str, Any]:
    """`model`: the one model served (the only value requests may name); `auth`: whether
    /v1/* needs a bearer key."""
    _, top = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    schemas: dict[str, Any] = top["$defs"]
    for request in ("ChatCompletionRequest", "CompletionRequest"):
        schemas[request]["properties"]["model"] = {"type": "string", "enum": [model]}
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
                        **(_errors(("401",)) if auth else {}),
                    },
                }
            },
            "/v1/chat/completions": _generation(
                "ChatCompletionRequest", "ChatCompletion", "Chat completion", auth
            ),
            "/v1/completions": _generation(
                "CompletionRequest", "Completion", "Text completion", auth
            ),
            "/health": {"get": {"responses": {"200": _json("Health", "The server is up")}}},
            "/metrics": {"get": {"responses": {"200": text}}},
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
    return doc
