"""POST /v1/chat/completions: chat messages through the model's chat template, answered
whole or streamed."""

from __future__ import annotations

import time
import uuid

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from gen.backends.base import Delta, Message
from gen.backends.collect import Collected
from gen.sampling import InvalidParam, TokenLogprob
from gen.server.errors import APIError
from gen.server.openai.generation import Place
from gen.server.openai.logprobs import TokenBytes, chat_logprobs
from gen.server.openai.requests import ChatCompletionRequest, ChatMessage
from gen.server.openai.responses import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChoiceLogprobs,
    ChunkDelta,
    FunctionDelta,
    TextStamp,
    ToolCallDelta,
    ToolCallOut,
    Usage,
    usage,
)
from gen.server.openai.streaming import Chunk, error_chunks, respond
from gen.server.openai.tools import read_calls
from gen.server.request import admitted, encoded, parse_body, server_state, text_size


class ChatChunks:
    """A chat answer's chunks. Where tools are offered (`calling`) the text is held until
    its first character says what it is: a call list ("[") is held to its end and goes out
    as tool_calls deltas (per call: its id, type and name, then its arguments), finish
    reason "tool_calls"; anything else streams as text."""

    body = ChatCompletion

    def __init__(
        self, model: str, token_bytes: TokenBytes, logprobs: bool, calling: bool = False
    ) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.token_bytes = token_bytes
        self.logprobs = logprobs
        self.calling = calling
        self.held: list[Delta] = []
        self.text_started = not calling
        mark = ChatChunkChoice(delta=ChunkDelta(content=TextStamp.MARK))
        self.stamp = TextStamp(self._chunk([mark]))  # a text chunk without logprobs

    def _chunk(self, choices: list[ChatChunkChoice], used: Usage | None = None) -> BaseModel:
        return ChatCompletionChunk(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=used
        )

    def _logprobs(self, logprobs: list[TokenLogprob]) -> ChoiceLogprobs | None:
        return chat_logprobs(logprobs, self.token_bytes) if self.logprobs else None

    def _text(self, text: str, logprobs: list[TokenLogprob]) -> Chunk:
        if not self.logprobs:
            return self.stamp(text)
        choice = ChatChunkChoice(delta=ChunkDelta(content=text), logprobs=self._logprobs(logprobs))
        return self._chunk([choice])

    def _held(self) -> tuple[str, list[TokenLogprob]]:
        text = "".join(d.text for d in self.held)
        return text, [lp for d in self.held for lp in d.logprobs]

    def opening(self) -> list[Chunk]:
        role = ChatChunkChoice(delta=ChunkDelta(role="assistant", content=""))
        return [self._chunk([role])]

    def piece(self, delta: Delta) -> list[Chunk]:
        if self.text_started:
            return [self._text(delta.text, delta.logprobs)]
        self.held.append(delta)
        text, logprobs = self._held()
        if not text or text.startswith("["):
            return []  # a call list, held to its end
        self.text_started = True
        self.held = []
        return [self._text(text, logprobs)]

    def _calls(self, calls: list[ToolCallOut], logprobs: list[TokenLogprob]) -> list[Chunk]:
        out: list[Chunk] = []
        for i, call in enumerate(calls):
            named = FunctionDelta(name=call.function.name, arguments="")
            head = ToolCallDelta(index=i, id=call.id, type="function", function=named)
            arguments = ToolCallDelta(
                index=i, function=FunctionDelta(arguments=call.function.arguments)
            )
            out.append(self._chunk([ChatChunkChoice(delta=ChunkDelta(tool_calls=[head]))]))
            last = i == len(calls) - 1
            choice = ChatChunkChoice(
                delta=ChunkDelta(tool_calls=[arguments]),
                logprobs=self._logprobs(logprobs) if last else None,
            )
            out.append(self._chunk([choice]))
        return out

    def finish(self, delta: Delta) -> list[Chunk]:
        out: list[Chunk] = []
        finish_reason = delta.finish_reason
        if not self.text_started:
            text, logprobs = self._held()
            calls = read_calls(text)
            if calls:
                out = self._calls(calls, logprobs)
                finish_reason = "tool_calls"
            elif text:  # a call list cut short (max_tokens): the text it got to
                out = [self._text(text, logprobs)]
        choice = ChatChunkChoice(
            delta=ChunkDelta(),
            finish_reason=finish_reason,  # type: ignore[arg-type]
            stop_reason=delta.stop_reason,
        )
        return [*out, self._chunk([choice])]

    def usage(self, delta: Delta) -> BaseModel:
        return self._chunk([], usage(delta))

    def failure(self, error: APIError) -> list[BaseModel]:
        return error_chunks(error)

    def choice(self, done: Collected) -> BaseModel:
        calls = read_calls(done.text) if self.calling else None
        message = (
            AssistantMessage(content=None, tool_calls=calls)
            if calls
            else AssistantMessage(content=done.text)
        )
        return ChatChoice(
            message=message,
            logprobs=self._logprobs(done.logprobs),
            finish_reason="tool_calls" if calls else done.finish_reason,  # type: ignore[arg-type]
            stop_reason=done.stop_reason,
        )


def template_messages(messages: list[ChatMessage]) -> list[Message]:
    """The turns as the chat template takes them (a developer message is a system one; an
    assistant turn's tool calls and a tool turn's call id go with them, gen.engine.chat
    renders them)."""
    turns: list[Message] = []
    for m in messages:
        turn: Message = {"role": "system" if m.role == "developer" else m.role}
        turn["content"] = m.text()
        if m.tool_calls:
            turn["content"] = None if m.content is None else m.text()
            turn["tool_calls"] = [call.as_template_takes() for call in m.tool_calls]
        if m.tool_call_id is not None:
            turn["tool_call_id"] = m.tool_call_id
        turns.append(turn)
    return turns


@admitted
async def chat_completions(request: Request, place: Place) -> Response:
    state = server_state(request)
    backend = state.backend
    req = await parse_body(request, ChatCompletionRequest)
    state.check_request(req)
    tools = req.template_tools()
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
    turns = template_messages(req.messages)
    try:  # a long prompt off the event loop: it takes seconds, and other streams go on
        ids = await encoded(
            text_size(turns, tools),
            backend.encode,
            turns,
            continue_final=req.continue_final_message,
            add_generation_prompt=req.wants_generation_prompt(),
            tools=tools,
        )
    except Exception as exc:  # the model's chat template refused the conversation
        raise APIError(
            400, f"messages: the chat template failed: {exc}", param="messages"
        ) from None
    state.check_prompt(ids, "messages")
    params = req.sampling_params(backend.context_window - len(ids), req.engine_logprobs())
    try:
        gen = await state.start(ids, params, req, place)
    except InvalidParam as exc:  # a tool's parameters that are no schema gen can hold to
        if not tools:
            raise
        raise InvalidParam("tools", f"tools: {exc}") from None
    chunks = ChatChunks(backend.model, backend.token_bytes, req.logprobs, calling=bool(tools))
    return await respond(
        request, [gen], [chunks], stream=req.stream, include_usage=req.include_usage
    )
