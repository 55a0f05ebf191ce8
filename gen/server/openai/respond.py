"""POST /v1/responses: OpenAI's Responses API, stateless (llama.cpp's subset): input as text
or message items through the chat template, answered as a Response whole or as its typed
events streamed. Nothing is stored, so no request can continue an earlier response."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from gen.backends.base import Delta
from gen.backends.collect import Collected
from gen.server.errors import APIError
from gen.server.openai.chat import template_messages
from gen.server.openai.generation import Place
from gen.server.openai.responses import Usage, usage
from gen.server.openai.responses_api import (
    ContentPartEvent,
    ErrorEvent,
    IncompleteDetails,
    InputTokensDetails,
    Lifecycle,
    LifecycleEvent,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    ResponseError,
    ResponseObject,
    ResponseRequest,
    ResponseStatus,
    ResponseUsage,
    Status,
    TextConfig,
    TextDeltaEvent,
    TextDoneEvent,
)
from gen.server.openai.streaming import respond
from gen.server.request import admitted, encoded, parse_body, server_state, text_size


def response_usage(used: Usage) -> ResponseUsage:
    """Usage in the Responses API's words."""
    return ResponseUsage(
        input_tokens=used.prompt_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=used.prompt_tokens_details.cached_tokens
        ),
        output_tokens=used.completion_tokens,
        total_tokens=used.total_tokens,
    )


class ResponseEvents:
    """One response, worded for streaming.respond: its events in the Responses API's order
    (created, in_progress, the message item and its text part added; a text delta per
    piece; the text, part and item done; then completed, or incomplete when max tokens cut
    it off, carrying the usage; on an error, `error` then failed), each numbered by
    sequence_number; or whole, the Response."""

    def __init__(self, model: str, req: ResponseRequest) -> None:
        self.id = f"resp_{uuid.uuid4().hex}"
        self.item_id = f"msg_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.req = req
        self.sequence = 0
        self.text: list[str] = []
        self.message: OutputMessage | None = None  # once generation has ended

    def _number(self) -> int:
        self.sequence += 1
        return self.sequence - 1

    def _response(self, status: ResponseStatus, **fields: Any) -> ResponseObject:
        req = self.req
        return ResponseObject(
            id=self.id,
            created_at=self.created,
            status=status,
            instructions=req.instructions,
            max_output_tokens=req.max_output_tokens,
            model=self.model,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            text=req.text or TextConfig(),
            user=req.user,
            metadata=req.metadata or {},
            **fields,
        )

    def _message(self, text: str, finish_reason: str | None) -> OutputMessage:
        status: Status = "incomplete" if finish_reason == "length" else "completed"
        self.message = OutputMessage(
            id=self.item_id, status=status, content=[OutputText(text=text)]
        )
        return self.message

    def _ended(self, message: OutputMessage, used: Usage) -> ResponseObject:
        """The Response once generation has ended: incomplete where max tokens cut it off."""
        cut = message.status == "incomplete"
        return self._response(
            message.status,
            completed_at=int(time.time()),
            incomplete_details=IncompleteDetails(reason="max_output_tokens") if cut else None,
            output=[message],
            usage=response_usage(used),
        )

    def opening(self) -> list[BaseModel]:
        started = self._response("in_progress", output=[])
        item = OutputMessage(id=self.item_id, status="in_progress", content=[])
        return [
            LifecycleEvent(
                type="response.created", sequence_number=self._number(), response=started
            ),
            LifecycleEvent(
                type="response.in_progress", sequence_number=self._number(), response=started
            ),
            OutputItemEvent(
                type="response.output_item.added", sequence_number=self._number(), item=item
            ),
            ContentPartEvent(
                type="response.content_part.added",
                sequence_number=self._number(),
                item_id=self.item_id,
                part=OutputText(text=""),
            ),
        ]

    def piece(self, delta: Delta) -> list[BaseModel]:
        if not delta.text:
            return []
        self.text.append(delta.text)
        return [
            TextDeltaEvent(sequence_number=self._number(), item_id=self.item_id, delta=delta.text)
        ]

    def finish(self, delta: Delta) -> list[BaseModel]:
        text = "".join(self.text)
        message = self._message(text, delta.finish_reason)
        return [
            TextDoneEvent(sequence_number=self._number(), item_id=self.item_id, text=text),
            ContentPartEvent(
                type="response.content_part.done",
                sequence_number=self._number(),
                item_id=self.item_id,
                part=message.content[0],
            ),
            OutputItemEvent(
                type="response.output_item.done", sequence_number=self._number(), item=message
            ),
        ]

    def usage(self, delta: Delta) -> BaseModel:
        """The last event, completed or incomplete: the Response with its usage (after
        finish(), which made the message, unless the stream ended without a finish)."""
        message = self.message or self._message("".join(self.text), None)
        response = self._ended(message, usage(delta))
        cut = message.status == "incomplete"
        kind: Lifecycle = "response.incomplete" if cut else "response.completed"
        return LifecycleEvent(type=kind, sequence_number=self._number(), response=response)

    def failure(self, error: APIError) -> list[BaseModel]:
        """An error mid-stream: the `error` event, then the Response failed, with the
        text sent so far as an incomplete message."""
        code = error.code or "server_error"
        sent = OutputMessage(
            id=self.item_id, status="incomplete", content=[OutputText(text="".join(self.text))]
        )
        failed = self._response(
            "failed", error=ResponseError(code=code, message=error.message), output=[sent]
        )
        return [
            ErrorEvent(
                sequence_number=self._number(), code=code, message=error.message, param=error.param
            ),
            LifecycleEvent(type="response.failed", sequence_number=self._number(), response=failed),
        ]

    def choice(self, done: Collected) -> BaseModel:
        return self._message(done.text, done.finish_reason)

    def body(self, *, choices: list[OutputMessage], usage: Usage, **answer: Any) -> BaseModel:
        """The whole Response, from the answer as streaming.whole hands it over: the one
        choice (the message), the usage in chat's words; id, created and model are ours."""
        return self._ended(choices[0], usage)


def _refuse_state(req: ResponseRequest) -> None:
    """What needs a stored response or conversation is a 400: none is kept here (`store`
    is accepted, and nothing stored, as llama.cpp does). Tools are not offered here."""
    for param in ("previous_response_id", "conversation", "background"):
        if getattr(req, param):
            raise APIError(
                400,
                f"{param}: gen serve keeps no responses or conversations (its Responses API "
                f"is stateless); send the whole conversation in `input`",
                param=param,
                code="unsupported_parameter",
            )
    if req.tools:
        raise APIError(
            400,
            "tools: /v1/responses offers the model no tools; tool calls are on "
            "/v1/chat/completions",
            param="tools",
            code="unsupported_parameter",
        )


@admitted
async def create_response(request: Request, place: Place) -> Response:
    state = server_state(request)
    backend = state.backend
    req = await parse_body(request, ResponseRequest)
    _refuse_state(req)
    state.check_request(req)
    turns = template_messages(req.messages())
    try:  # a long prompt off the event loop: it takes seconds, and other streams go on
        ids = await encoded(text_size(turns), backend.encode, turns)
    except Exception as exc:  # the model's chat template refused the conversation
        raise APIError(400, f"input: the chat template failed: {exc}", param="input") from None
    state.check_prompt(ids, "input")
    params = req.sampling_params(backend.context_window - len(ids), None)
    gen = await state.start(ids, params, req, place)
    events = ResponseEvents(backend.model, req)
    return await respond(request, [gen], [events], stream=req.stream, include_usage=True)
