"""POST /v1/chat/completions: chat messages through the model's chat template, answered
whole or streamed."""

from __future__ import annotations

import asyncio
import time
import uuid

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from gen.backends.base import Delta, Message
from gen.backends.collect import Collected
from gen.sampling import TokenLogprob
from gen.server.errors import APIError
from gen.server.openai.generation import Place
from gen.server.openai.logprobs import TokenBytes, chat_logprobs
from gen.server.openai.requests import ChatCompletionRequest
from gen.server.openai.responses import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChoiceLogprobs,
    ChunkDelta,
    Usage,
    usage,
)
from gen.server.openai.streaming import respond
from gen.server.request import admitted, parse_body, server_state


class ChatChunks:
    body = ChatCompletion

    def __init__(self, model: str, token_bytes: TokenBytes, logprobs: bool) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.token_bytes = token_bytes
        self.logprobs = logprobs

    def _chunk(self, choices: list[ChatChunkChoice], used: Usage | None = None) -> BaseModel:
        return ChatCompletionChunk(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=used
        )

    def _logprobs(self, logprobs: list[TokenLogprob]) -> ChoiceLogprobs | None:
        return chat_logprobs(logprobs, self.token_bytes) if self.logprobs else None

    def opening(self) -> list[BaseModel]:
        role = ChatChunkChoice(delta=ChunkDelta(role="assistant", content=""))
        return [self._chunk([role])]

    def piece(self, delta: Delta) -> BaseModel:
        choice = ChatChunkChoice(
            delta=ChunkDelta(content=delta.text), logprobs=self._logprobs(delta.logprobs)
        )
        return self._chunk([choice])

    def finish(self, delta: Delta) -> BaseModel:
        choice = ChatChunkChoice(
            delta=ChunkDelta(),
            finish_reason=delta.finish_reason,  # type: ignore[arg-type]
            stop_reason=delta.stop_reason,
        )
        return self._chunk([choice])

    def usage(self, delta: Delta) -> BaseModel:
        return self._chunk([], usage(delta))

    def choice(self, done: Collected) -> BaseModel:
        return ChatChoice(
            message=AssistantMessage(content=done.text),
            logprobs=self._logprobs(done.logprobs),
            finish_reason=done.finish_reason,  # type: ignore[arg-type]
            stop_reason=done.stop_reason,
        )


def _messages(req: ChatCompletionRequest) -> list[Message]:
    """The turns as the chat template takes them (a developer message is a system one; an
    assistant turn's tool calls go with it, gen.engine.chat renders them)."""
    turns: list[Message] = []
    for m in req.messages:
        turn: Message = {"role": "system" if m.role == "developer" else m.role}
        turn["content"] = m.text()
        if m.tool_calls:
            turn["content"] = None if m.content is None else m.text()
            turn["tool_calls"] = [call.as_template_takes() for call in m.tool_calls]
        turns.append(turn)
    return turns


@admitted
async def chat_completions(request: Request, place: Place) -> Response:
    state = server_state(request)
    backend = state.backend
    req = await parse_body(request, ChatCompletionRequest)
    state.check_request(req)
    req.check_tools()
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    if req.continue_final_message:
        if req.messages[-1].role != "assistant":
            raise APIError(
                400,
                "continue_final_message needs the last message to be the assistant's",
                param="continue_final_message",
            )
        if req.add_generation_prompt and "add_generation_prompt" in req.model_fields_set:
            raise APIError(
                400,
                "continue_final_message and add_generation_prompt cannot both be true",
                param="add_generation_prompt",
            )
    try:  # off the event loop: a long prompt takes seconds, and other streams go on
        ids = await asyncio.to_thread(
            backend.encode,
            _messages(req),
            continue_final=req.continue_final_message,
            add_generation_prompt=req.wants_generation_prompt(),
        )
    except Exception as exc:  # the model's chat template refused the conversation
        raise APIError(
            400, f"messages: the chat template failed: {exc}", param="messages"
        ) from None
    state.check_prompt(ids, "messages")
    params = req.sampling_params(backend.context_window - len(ids), req.engine_logprobs())
    gen = await state.start(ids, params, req, place)
    chunks = ChatChunks(backend.model, backend.token_bytes, req.logprobs)
    return await respond(
        request, [gen], [chunks], stream=req.stream, include_usage=req.include_usage
    )
