"""The OpenAI API's responses as pydantic models: completions, chunks, models, errors."""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)


FinishReason = Literal["stop", "length", "abort", "tool_calls"]
StopReason = int | str | None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobContent(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprobContent] | None = None


class CallFunction(BaseModel):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: CallFunction


class AssistantMessage(BaseModel):
    """content null where the model called tools; tool_calls left out where it did not
    (as OpenAI answers)."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCallOut] | None = None

    @model_serializer(mode="wrap")
    def _calls_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if not out.get("tool_calls"):
            out.pop("tool_calls", None)
        return out


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: FinishReason
    stop_reason: StopReason = Field(
        default=None, description="the stop string or token id that ended it; null for EOS"
    )


class _Answer(BaseModel):
    """What an answer and each chunk of one begin with; `object` names which it is."""

    id: str
    object: str
    created: int
    model: str


class ChatCompletion(_Answer):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[ChatChoice]
    usage: Usage


class _Sparse(BaseModel):
    """A delta's part: only the fields it has (OpenAI's chunks leave the others out)."""

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class FunctionDelta(_Sparse):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(_Sparse):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionDelta


class ChunkDelta(_Sparse):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: FinishReason | None = None
    stop_reason: StopReason = None


class ChatCompletionChunk(_Answer):
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChatChunkChoice]
    usage: Usage | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: FinishReason | None = None
    stop_reason: StopReason = None


class Completion(_Answer):
    """A text completion, and (object "text_completion" too) each chunk of a streamed one."""

    object: Literal["text_completion"] = "text_completion"
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "gen"
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    model: str


class Counts(Protocol):
    """A generation's token counts (its last delta, or the whole of it collected)."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def cached_prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


def usage(counts: Counts) -> Usage:
    return Usage(
        prompt_tokens=counts.prompt_tokens,
        completion_tokens=counts.completion_tokens,
        total_tokens=counts.prompt_tokens + counts.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=counts.cached_prompt_tokens),
    )


class TextStamp:
    """A chunk's JSON with its one text field left open, filled per token: the bytes
    pydantic writes for the same chunk (both escape only quotes, backslashes and control
    characters, alike), without a model built and serialised for every token."""

    MARK = "\x00"  # stands for the text while the template is made

    def __init__(self, chunk: BaseModel) -> None:
        head, mark, tail = chunk.model_dump_json().partition(json.dumps(self.MARK))
        if not mark:
            raise ValueError("the chunk has no text field holding TextStamp.MARK")
        self.head = head
        self.tail = tail

    def __call__(self, text: str) -> str:
        return self.head + json.dumps(text, ensure_ascii=False) + self.tail


def dump(model: BaseModel) -> dict[str, Any]:
    """A response as JSON-ready data (None fields kept: OpenAI sends them as null)."""
    return model.model_dump(mode="json")
