"""The Starlette app of `gen serve`: OpenAI-compatible endpoints over one shared engine,
/health, /metrics and /openapi.json; every error OpenAI-shaped."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gen.errors import GenError
from gen.sampling import InvalidParam
from gen.server.config import ServerConfig
from gen.server.errors import APIError, from_exception
from gen.server.metrics import CONTENT_TYPE
from gen.server.openai.chat import chat_completions
from gen.server.openai.completions import completions
from gen.server.openai.generation import ServedModel
from gen.server.openai.respond import create_response
from gen.server.openai.responses import Health, ModelCard, ModelList, dump
from gen.server.openapi import openapi_document
from gen.server.request import server_state
from gen.server.runs.manager import RunManager
from gen.server.runs.openapi import runs_paths
from gen.server.runs.routes import ROUTES as RUN_ROUTES
from gen.server.security import (
    SESSION_COOKIE,
    BearerAuth,
    BodyLimit,
    LoopbackHosts,
    session_token,
)
from gen.server.state import ServerState

STATIC = Path(__file__).parent / "static"
log = logging.getLogger("gen.serve")


def _card(request: Request) -> ModelCard:
    state = server_state(request)
    backend = state.backend
    return ModelCard(id=backend.model, created=state.created, max_model_len=backend.context_window)


async def list_models(request: Request) -> Response:
    return JSONResponse(dump(ModelList(data=[_card(request)])))


async def get_model(request: Request) -> Response:
    """GET /v1/models/{id}: the one model served; any other id is OpenAI's 404."""
    server_state(request).check_model(request.path_params["model_id"])
    return JSONResponse(dump(_card(request)))


async def health(request: Request) -> Response:
    return JSONResponse(dump(Health(model=server_state(request).backend.model)))


async def metrics(request: Request) -> Response:
    state = server_state(request)
    runs: RunManager | None = request.app.state.runs
    counts = runs.counts() if runs is not None else (0, 0)
    return Response(state.metrics.render(state.admission.count, counts), media_type=CONTENT_TYPE)


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


async def _api_error(request: Request, exc: APIError) -> Response:
    return exc.response()


async def _http_error(request: Request, exc: HTTPException) -> Response:
    code = "not_found" if exc.status_code == 404 else None
    return APIError(exc.status_code, str(exc.detail), code=code).response()


async def _gen_error(request: Request, exc: Exception) -> Response:
    return from_exception(exc).response()


async def _internal_error(request: Request, exc: Exception) -> Response:
    return from_exception(exc).response()


async def session(request: Request) -> Response:
    """POST /v1/session (with the key): the cookie that lets the dashboard's EventSource,
    images and links in; HttpOnly, so no script (of this page or another) can read it."""
    key = server_state(request).config.api_key
    response = Response(status_code=204)
    if key:
        response.set_cookie(
            SESSION_COOKIE, session_token(key), httponly=True, samesite="strict", path="/v1"
        )
    return response


async def dashboard(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


def create_app(
    backend: ServedModel, config: ServerConfig | None = None, runs: RunManager | None = None
) -> Starlette:
    """The app; with `runs` (the pipeline runner over the same engine) also the runs API."""
    config = config or ServerConfig()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if runs is not None:
            resumed = runs.resume_interrupted()
            if resumed:
                log.warning("resuming %d interrupted run(s): %s", len(resumed), " ".join(resumed))
        yield
        if runs is not None:
            await runs.shutdown()
        await backend.aclose()

    middleware = [Middleware(BodyLimit, limit=config.max_body_bytes, timeout=config.body_timeout)]
    if config.api_key:
        middleware.insert(0, Middleware(BearerAuth, api_key=config.api_key))
    if config.loopback_only:
        middleware.insert(0, Middleware(LoopbackHosts))
    if config.cors_origins:  # outermost: a preflight is answered before the key is asked
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type"],
            ),
        )
    handlers: dict[Any, Any] = {
        APIError: _api_error,
        HTTPException: _http_error,
        InvalidParam: _gen_error,
        GenError: _gen_error,
        Exception: _internal_error,
    }
    app = Starlette(
        routes=[
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/responses", create_response, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/v1/session", session, methods=["POST"]),
            *RUN_ROUTES,
            Route("/", dashboard, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
        ],
        middleware=middleware,
        exception_handlers=handlers,
        lifespan=lifespan,
    )
    app.state.server = ServerState(backend, config)
    app.state.runs = runs
    app.state.openapi = openapi_document(
        backend.model,
        auth=bool(config.api_key),
        window=backend.context_window,
        paths=runs_paths() if runs is not None else None,
    )
    return app
