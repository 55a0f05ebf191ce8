"""POST /v1/completions: raw text (or token ids) continued as is, no chat template."""

from __future__ import annotations

import asyncio
import time
import uuid

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from gen.backends.base import Delta
from gen.backends.collect import Collected
from gen.sampling import TokenLogprob
from gen.server.errors import APIError
from gen.server.openai.generation import Place
from gen.server.openai.logprobs import TokenBytes, completion_logprobs
from gen.server.openai.requests import CompletionRequest
from gen.server.openai.responses import (
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    usage,
)
from gen.server.openai.streaming import respond
from gen.server.request import admitted, parse_body, server_state
from gen.server.state import ServerState

DEFAULT_MAX_TOKENS = 16  # OpenAI's for this endpoint


class TextChunks:
    body = Completion

    def __init__(self, model: str, token_bytes: TokenBytes, logprobs: bool, echo: str) -> None:
        self.id = f"cmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.token_bytes = token_bytes
        self.logprobs = logprobs
        self.echo = echo
        self.offset = len(echo)  # characters sent, for logprobs' text_offset

    def _chunk(self, choices: list[CompletionChoice], delta: Delta | None = None) -> BaseModel:
        used = None if delta is None else usage(delta)
        return Completion(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=used
        )

    def _logprobs(self, logprobs: list[TokenLogprob]) -> CompletionLogprobs | None:
        if not self.logprobs:
            return None
        return completion_logprobs(logprobs, self.token_bytes, self.offset)

    def opening(self) -> list[BaseModel]:
        return [self._chunk([CompletionChoice(text=self.echo)])] if self.echo else []

    def piece(self, delta: Delta) -> BaseModel:
        choice = CompletionChoice(text=delta.text, logprobs=self._logprobs(delta.logprobs))
        self.offset += len(delta.text)
        return self._chunk([choice])

    def finish(self, delta: Delta) -> BaseModel:
        choice = CompletionChoice(
            text="",
            finish_reason=delta.finish_reason,  # type: ignore[arg-type]
            stop_reason=delta.stop_reason,
        )
        return self._chunk([choice])

    def usage(self, delta: Delta) -> BaseModel:
        return self._chunk([], delta)

    def choice(self, done: Collected) -> BaseModel:
        return CompletionChoice(
            text=self.echo + done.text,
            logprobs=self._logprobs(done.logprobs),
            finish_reason=done.finish_reason,  # type: ignore[arg-type]
            stop_reason=done.stop_reason,
        )


def _prompt(state: ServerState, req: CompletionRequest) -> tuple[list[int], str]:
    """The prompt's ids, and its text (what `echo` repeats)."""
    backend, prompt = state.backend, req.prompt
    if isinstance(prompt, list) and len(prompt) > 1 and isinstance(prompt[0], str):
        raise APIError(400, "prompt: one prompt per request", param="prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return backend.encode_text(prompt), prompt
    ids = [int(i) for i in prompt]
    state.check_prompt(ids, "prompt")
    text = b"".join(backend.token_bytes(i) for i in ids).decode("utf-8", errors="replace")
    return ids, text


@admitted
async def completions(request: Request, place: Place) -> Response:
    state = server_state(request)
    backend = state.backend
    req = await parse_body(request, CompletionRequest)
    state.check_request(req)
    ids, text = await asyncio.to_thread(_prompt, state, req)  # a long text takes seconds
    state.check_prompt(ids, "prompt")
    room = backend.context_window - len(ids)
    params = req.sampling_params(min(DEFAULT_MAX_TOKENS, room), req.engine_logprobs())
    echo = text if req.echo else ""
    gen = await state.start(ids, params, req, place)
    chunks = TextChunks(backend.model, backend.token_bytes, req.logprobs is not None, echo)
    return await respond(request, gen, chunks, stream=req.stream, include_usage=req.include_usage)
