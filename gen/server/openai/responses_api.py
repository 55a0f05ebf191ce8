"""OpenAI's Responses API (/v1/responses) as pydantic models: its request (input items,
instructions, text.format) and its answer, the Response object with its output message and
usage, and the typed events a streamed one is sent as. Stateless: nothing is stored, so
nothing here refers to an earlier response."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from gen.server.openai.requests import ChatMessage, JsonSchemaFormat, ResponseFormat, Sampling

# Requests: unknown fields are ignored (pydantic's default), as on the other endpoints.


class ContentPart(BaseModel):
    """A message's text: `input_text` in a turn sent, `output_text` in an earlier answer
    sent back."""

    type: Literal["input_text", "output_text"]
    text: str


class InputMessage(BaseModel):
    """An item of `input`: a turn, as `{"role", "content"}` or `{"type": "message", …}`."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class TextFormat(BaseModel):
    """`text.format`: plain text, any JSON object, or JSON valid against `schema` (the
    Responses API's flat form of chat's response_format)."""

    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> TextFormat:
        if self.type == "json_schema" and self.schema_ is None:
            raise ValueError("type json_schema needs a schema")
        return self

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        out = {k: v for k, v in out.items() if v is not None}
        if "schema_" in out:
            out["schema"] = out.pop("schema_")
        return out

    def as_response_format(self) -> ResponseFormat:
        """The same format in chat's words, whose constraint the engine holds output to."""
        if self.type != "json_schema":
            return ResponseFormat(type=self.type)
        schema = JsonSchemaFormat.model_validate(
            {"name": self.name, "schema": self.schema_, "strict": self.strict}
        )
        return ResponseFormat(type="json_schema", json_schema=schema)


class TextConfig(BaseModel):
    format: TextFormat = Field(default_factory=TextFormat)


class ResponseRequest(Sampling):
    """A Responses API request; gen's samplers and vLLM's extras are taken too, as on chat
    completions (`seed`, `stop`, `top_k`, …)."""

    input: str | list[InputMessage] = Field(
        description="the user's text, or the conversation as message items (at least one)"
    )
    instructions: str | None = Field(default=None, description="a system message placed first")
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    text: TextConfig | None = None
    store: bool | None = Field(
        default=None, description="accepted, but nothing is stored: gen serve is stateless"
    )
    previous_response_id: str | None = Field(
        default=None, description="refused: no response is stored to continue from"
    )
    conversation: str | dict[str, Any] | None = Field(
        default=None, description="refused: no conversation is stored"
    )
    background: bool | None = Field(default=None, description="refused when true")
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="refused when not empty (tool calls: /v1/chat/completions)"
    )
    metadata: dict[str, str] | None = None

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str | list[InputMessage]) -> str | list[InputMessage]:
        if isinstance(value, list) and not value:
            raise ValueError("give a text or at least one message")
        return value

    @property
    def response_format(self) -> ResponseFormat | None:
        """text.format as chat's response_format: Sampling.constraint() reads it."""
        return self.text.format.as_response_format() if self.text is not None else None

    def constraint_field(self) -> str:
        field = super().constraint_field()
        return "text.format" if field == "response_format" else field

    def requested_max_tokens(self) -> int | None:
        return self.max_output_tokens or self.max_tokens

    def messages(self) -> list[ChatMessage]:
        """The conversation as chat turns: the instructions first, as a system turn."""
        turns = []
        if self.instructions is not None:
            turns.append(ChatMessage(role="system", content=self.instructions))
        if isinstance(self.input, str):
            turns.append(ChatMessage(role="user", content=self.input))
        else:
            turns += [ChatMessage(role=m.role, content=m.text()) for m in self.input]
        return turns


# Answers


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)


Status = Literal["in_progress", "completed", "incomplete"]  # a message's
ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]
Lifecycle = Literal[
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
]


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    status: Status
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class InputTokensDetails(BaseModel):
    cached_tokens: int = 0


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


class ResponseError(BaseModel):
    code: str
    message: str


class ResponseObject(BaseModel):
    """The Response: what a whole answer is, and what its lifecycle events carry (with
    `output` as it stands then). Request settings are echoed as OpenAI echoes them."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[OutputMessage]
    parallel_tool_calls: bool = True
    previous_response_id: None = None
    store: Literal[False] = False  # whatever was asked: nothing is stored
    temperature: float
    top_p: float
    text: TextConfig
    tool_choice: Literal["auto"] = "auto"
    tools: list[Any] = Field(default_factory=list)
    truncation: Literal["disabled"] = "disabled"
    usage: ResponseUsage | None = None
    user: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)


class StreamEvent(BaseModel):
    """One event of a streamed response, sent as `event: <type>` with this as its data;
    sequence_number counts every event of the stream from 0."""

    type: str
    sequence_number: int


class LifecycleEvent(StreamEvent):
    type: Lifecycle
    response: ResponseObject


class OutputItemEvent(StreamEvent):
    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int = 0
    item: OutputMessage


class ContentPartEvent(StreamEvent):
    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int = 0
    content_index: int = 0
    part: OutputText


class TextDeltaEvent(StreamEvent):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    item_id: str
    output_index: int = 0
    content_index: int = 0
    delta: str
    logprobs: list[Any] = Field(default_factory=list)


class TextDoneEvent(StreamEvent):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    item_id: str
    output_index: int = 0
    content_index: int = 0
    text: str
    logprobs: list[Any] = Field(default_factory=list)


class ErrorEvent(StreamEvent):
    """An error after the stream began (then `response.failed`)."""

    type: Literal["error"] = "error"
    code: str | None
    message: str
    param: str | None


EVENTS: tuple[type[StreamEvent], ...] = (
    LifecycleEvent,
    OutputItemEvent,
    ContentPartEvent,
    TextDeltaEvent,
    TextDoneEvent,
    ErrorEvent,
)
