"""The built-in engine as a Backend: one shared Engine, async streams, `kv` continuation."""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

from gen.backends.base import Delta, Message
from gen.backends.driver import EngineDriver
from gen.backends.tokens import ChatTokens
from gen.engine import Engine, Output
from gen.engine.config import EngineConfig
from gen.engine.engine import EngineStats
from gen.errors import BackendError, ContextOverflowError
from gen.models import LoadedModel
from gen.sampling import SamplingParams, TokenLogprob

_ids = itertools.count()


class Inbox:
    """What the driver thread has for the streams of one event loop, handed over in one
    wake-up of the loop per engine step. (One call_soon_threadsafe per token of every
    stream woke the loop as often, and each wake-up took the GIL from the engine thread
    between its kernels: with 32 streams, a third of the served time.)"""

    def __init__(self, loop: asyncio.AbstractEventLoop, driver: EngineDriver) -> None:
        self.loop = loop
        self.driver = driver
        self.lock = threading.Lock()
        self.pending: list[tuple[LocalStream, Output | BaseException]] = []
        self.scheduled = False

    def put(self, stream: LocalStream, item: Output | BaseException) -> None:
        """On the driver thread: kept until wake()."""
        with self.lock:
            self.pending.append((stream, item))

    def wake(self) -> None:
        """On the driver thread, once a step's outputs are all put: the loop is asked to
        take them (unless it was asked already and has not yet)."""
        with self.lock:
            if self.scheduled or not self.pending:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._hand_over)
        except RuntimeError:  # its event loop has closed: nobody is listening any more
            with self.lock:
                gone, self.pending = self.pending, []
            for stream in {s.request_id for s, _ in gone}:
                self.driver.abort(stream)

    def _hand_over(self) -> None:
        with self.lock:
            items, self.pending, self.scheduled = self.pending, [], False
        for stream, item in items:
            stream.queue.put_nowait(item)


class LocalStream:
    def __init__(self, driver: EngineDriver, request_id: str, inbox: Inbox) -> None:
        self.driver = driver
        self.request_id = request_id
        self.inbox = inbox
        self.queue: asyncio.Queue[Output | BaseException] = asyncio.Queue()
        self.parked = False
        self.closed = False

    def deliver(self, item: Output | BaseException) -> None:
        """Called on the driver thread; the stream sees it once the inbox is woken."""
        self.inbox.put(self, item)

    async def deltas(self) -> AsyncIterator[Delta]:
        while True:
            item = await self.queue.get()
            if isinstance(item, BaseException):
                self.closed = True
                raise BackendError(f"generation failed: {item}") from item
            if not item.finished:
                if item.text or item.logprobs:
                    yield Delta(item.text, logprobs=item.logprobs)
                continue
            self.parked = item.parked and not self.closed
            yield Delta(
                item.text,
                finish_reason=item.finish_reason,
                stop_reason=item.stop_reason,
                prompt_tokens=item.prompt_tokens,
                cached_prompt_tokens=item.cached_prompt_tokens,
                completion_tokens=item.completion_tokens,
                logprobs=item.logprobs,
            )
            return

    async def resume(self, max_tokens: int) -> None:
        if not self.parked:
            raise BackendError("only a round that ended with 'length' can be resumed")
        self.parked = False
        self.driver.resume(self.request_id, max_tokens)

    async def close(self) -> str:
        """End the generation (frees its KV memory); returns text still held back."""
        if self.closed:
            return ""
        self.closed = True
        if not self.parked:
            self.driver.abort(self.request_id)
            return ""
        self.parked = False
        self.driver.release(self.request_id)
        item = await self.queue.get()
        return item.text if isinstance(item, Output) else ""


class LocalBackend(ChatTokens):
    name = "local"
    supports_kv = True
    supports_grammar = True

    def __init__(
        self, loaded: LoadedModel, config: EngineConfig | None = None, **settings: Any
    ) -> None:
        """An engine over the loaded model, run by `config` (its fields given as `settings`
        in place of its own: max_slots, max_model_len (below the model's own), ...)."""
        self.loaded = loaded
        self.model = loaded.name
        self.dtype: str | None = loaded.dtype
        self.tokenizer = loaded.tokenizer
        self.engine = Engine(loaded.model, loaded.tokenizer, config, **settings)
        self.context_window = self.engine.max_model_len
        self.vocab_size = loaded.config.vocab_size
        self.driver = EngineDriver(self.engine)
        self.inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Inbox] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def stats(self) -> EngineStats:
        """The engine's state as of its last step (read without waiting for it)."""
        return self.driver.stats

    async def chat(
        self,
        messages: list[Message],
        params: SamplingParams,
        *,
        hold: bool = False,
        continue_final: bool = False,
    ) -> LocalStream:
        return await self.generate(self.encode(messages, continue_final), params, hold=hold)

    def check(self, params: SamplingParams) -> None:
        """Refuse what the engine would refuse (a bad grammar: InvalidParam), before any
        answer has started."""
        if params.constraint is not None:
            self.engine.grammars.state(params.constraint)

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, hold: bool = False
    ) -> LocalStream:
        """Stream the completion of prompt ids already encoded (a chat's, or raw text's)."""
        if len(prompt_ids) >= self.engine.max_model_len:
            raise ContextOverflowError(
                f"prompt has {len(prompt_ids)} tokens; the context window is "
                f"{self.engine.max_model_len}",
                prompt_tokens=len(prompt_ids),
                limit=self.engine.max_model_len,
            )
        loop = asyncio.get_running_loop()
        inbox = self.inboxes.get(loop)
        if inbox is None:
            inbox = self.inboxes[loop] = Inbox(loop, self.driver)
        stream = LocalStream(self.driver, f"local-{next(_ids)}", inbox)
        self.driver.submit(
            stream.request_id, prompt_ids, params, stream.deliver, hold=hold, wake=inbox.wake
        )
        return stream

    async def score(
        self, contexts: list[list[Message]], text: str, limit: int | None = None
    ) -> list[list[float]] | None:
        """The engine scores between its steps, in rows of its own (see Engine.score); a
        conversation that ends with the assistant's message is continued by the text. The
        text's tokens past what the context window holds after the longest context are
        left out."""
        prompts = [self.encode(m, continue_final=m[-1]["role"] == "assistant") for m in contexts]
        room = self.engine.max_model_len - max((len(p) for p in prompts), default=0)
        ids = self.tokenizer.encode(text, add_special_tokens=False)[: min(limit or room, room)]
        if not contexts or not ids:
            return [[] for _ in contexts]
        return await asyncio.to_thread(self.driver.call, lambda e: e.score(prompts, ids))

    async def prompt_logprobs(self, ids: list[int], top: int) -> list[TokenLogprob]:
        """Each of ids[1:] scored after the ids before it (see Engine.prompt_logprobs)."""
        return await asyncio.to_thread(self.driver.call, lambda e: e.prompt_logprobs(ids, top))

    async def aclose(self) -> None:
        self.driver.stop()
