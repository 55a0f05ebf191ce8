"""POST /v1/completions: raw text (or token ids) continued as is, no chat template; a list
of prompts is a choice each, all in the engine's batch at once."""

from __future__ import annotations

import time
import uuid

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from gen.backends.base import Delta
from gen.backends.collect import Collected
from gen.sampling import TokenLogprob
from gen.server.errors import APIError
from gen.server.openai.generation import Generation, Place
from gen.server.openai.logprobs import UNSCORED, TextOffsets, TokenBytes, completion_logprobs
from gen.server.openai.requests import CompletionRequest
from gen.server.openai.responses import (
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    TextStamp,
    usage,
)
from gen.server.openai.streaming import Chunk, error_chunks, respond
from gen.server.request import admitted, encoded, parse_body, server_state, text_size
from gen.server.state import ServerState

DEFAULT_MAX_TOKENS = 16  # OpenAI's for this endpoint


class TextChunks:
    """One choice of a text completion: its echo (with the prompt's logprobs, if asked),
    then its text, its tokens placed against it (logprobs.TextOffsets)."""

    body = Completion

    def __init__(
        self,
        answer: tuple[str, int, str],
        index: int,
        token_bytes: TokenBytes,
        logprobs: bool,
        echo: str,
        echo_logprobs: list[TokenLogprob],
    ) -> None:
        self.id, self.created, self.model = answer
        self.index = index
        self.token_bytes = token_bytes
        self.logprobs = logprobs
        self.echo = echo
        self.echo_logprobs = echo_logprobs
        self.offsets = TextOffsets(token_bytes, len(echo))
        mark = CompletionChoice(index=index, text=TextStamp.MARK)
        self.stamp = TextStamp(self._chunk([mark]))  # a text chunk without logprobs

    def _chunk(self, choices: list[CompletionChoice], delta: Delta | None = None) -> BaseModel:
        used = None if delta is None else usage(delta)
        return Completion(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=used
        )

    def _logprobs(self, placed: list[tuple[TokenLogprob, int]]) -> CompletionLogprobs | None:
        return completion_logprobs(placed, self.token_bytes) if self.logprobs else None

    def _echoed(self) -> list[tuple[TokenLogprob, int]]:
        prompt = TextOffsets(self.token_bytes)
        return prompt.take(self.echo, self.echo_logprobs) + prompt.rest()

    def opening(self) -> list[Chunk]:
        if not self.echo:
            return []
        choice = CompletionChoice(
            index=self.index, text=self.echo, logprobs=self._logprobs(self._echoed())
        )
        return [self._chunk([choice])]

    def piece(self, delta: Delta) -> list[Chunk]:
        placed = self.offsets.take(delta.text, delta.logprobs)
        if not self.logprobs:
            return [self.stamp(delta.text)]
        choice = CompletionChoice(
            index=self.index, text=delta.text, logprobs=self._logprobs(placed)
        )
        return [self._chunk([choice])]

    def finish(self, delta: Delta) -> list[Chunk]:
        rest = self.offsets.rest()  # the tokens of a stop string cut from the text
        choice = CompletionChoice(
            index=self.index,
            text="",
            logprobs=self._logprobs(rest) if rest else None,
            finish_reason=delta.finish_reason,  # type: ignore[arg-type]
            stop_reason=delta.stop_reason,
        )
        return [self._chunk([choice])]

    def usage(self, delta: Delta) -> BaseModel:
        return self._chunk([], delta)

    def failure(self, error: APIError) -> list[BaseModel]:
        return error_chunks(error)

    def choice(self, done: Collected) -> BaseModel:
        placed = self.offsets.take(done.text, done.logprobs) + self.offsets.rest()
        if self.echo:
            placed = self._echoed() + placed
        return CompletionChoice(
            index=self.index,
            text=self.echo + done.text,
            logprobs=self._logprobs(placed),
            finish_reason=done.finish_reason,  # type: ignore[arg-type]
            stop_reason=done.stop_reason,
        )


def _prompts(state: ServerState, req: CompletionRequest) -> list[tuple[list[int], str]]:
    """Each prompt's ids, and its text (what `echo` repeats)."""
    backend = state.backend
    prompts = []
    for prompt in req.prompts():
        if isinstance(prompt, str):
            ids, text = backend.encode_text(prompt), prompt
            state.check_prompt(ids, "prompt")
        else:
            ids = [int(i) for i in prompt]
            state.check_prompt(ids, "prompt")  # (its ids are real tokens before they are read)
            raw = b"".join(backend.token_bytes(i) for i in ids)
            text = raw.decode("utf-8", errors="replace")
        prompts.append((ids, text))
    return prompts


def _places(state: ServerState, place: Place, count: int) -> list[Place]:
    """A place in the queue for each prompt: the request's own, and one more per prompt
    past the first (a 429 when they are not free, a 400 for more than it ever holds)."""
    limit = state.admission.limit
    if count > limit:
        raise APIError(
            400,
            f"prompt: at most {limit} prompts in one request (gen serve --max-queue), got {count}",
            param="prompt",
            code="invalid_value",
        )
    places = [place]
    try:
        for _ in range(count - 1):
            places.append(state.admission.enter())
    except APIError:
        for taken in places[1:]:
            taken.leave()
        raise
    return places


@admitted
async def completions(request: Request, place: Place) -> Response:
    state = server_state(request)
    backend = state.backend
    req = await parse_body(request, CompletionRequest)
    state.check_request(req)
    if not req.prompts():
        raise APIError(400, "prompt: no prompt given", param="prompt", code="empty_prompt")
    prompts = await encoded(text_size(req.prompts()), _prompts, state, req)  # (seconds if long)
    places = _places(state, place, len(prompts))
    gens: list[Generation] = []
    chunks: list[TextChunks] = []
    answer = (f"cmpl-{uuid.uuid4().hex}", int(time.time()), backend.model)
    try:
        for index, (ids, text) in enumerate(prompts):
            room = backend.context_window - len(ids)
            params = req.sampling_params(min(DEFAULT_MAX_TOKENS, room), req.engine_logprobs())
            scored: list[TokenLogprob] = []
            if req.echo and req.logprobs is not None:  # the prompt scored too, as OpenAI does
                scored = await backend.prompt_logprobs(ids, req.logprobs)
                scored.insert(0, TokenLogprob(ids[0], UNSCORED))
            gens.append(await state.start(ids, params, req, places[index]))
            logprobs = req.logprobs is not None
            echo = text if req.echo else ""
            chunks.append(TextChunks(answer, index, backend.token_bytes, logprobs, echo, scored))
    except BaseException:
        for gen in gens:
            await gen.close()
        for taken in places[1:]:
            taken.leave()  # (those a generation took are given back already)
        raise
    return await respond(request, gens, chunks, stream=req.stream, include_usage=req.include_usage)
