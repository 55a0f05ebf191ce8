"""What every request shares: the one engine, the server's settings (config.py), the queue
limit, the metrics."""

from __future__ import annotations

import asyncio
import time

from gen.errors import ContextOverflowError
from gen.sampling import SamplingParams
from gen.server.config import ServerConfig
from gen.server.errors import APIError
from gen.server.metrics import Metrics
from gen.server.openai.generation import (
    Admission,
    ConstrainedStream,
    FaultyStream,
    Generation,
    Place,
    ServedModel,
)
from gen.server.openai.requests import Sampling


class ServerState:
    def __init__(self, backend: ServedModel, config: ServerConfig) -> None:
        self.backend = backend
        self.config = config
        self.created = int(time.time())
        self.metrics = Metrics(backend.model, lambda: backend.stats)
        self.admission = Admission(config.max_queue, self.metrics)

    def check_prompt(self, ids: list[int], param: str) -> None:
        """A prompt must leave room for one token in the window, and name real tokens."""
        window = self.backend.context_window
        if not ids:
            raise APIError(400, f"{param}: the prompt is empty", param=param, code="empty_prompt")
        if len(ids) >= window:
            error = ContextOverflowError(
                f"this model's context window is {window} tokens; the prompt has {len(ids)} "
                f"tokens and needs room for at least one more",
                prompt_tokens=len(ids),
                limit=window,
            )
            raise APIError(400, str(error), param=param, code="context_length_exceeded")
        vocab = self.backend.vocab_size
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise APIError(
                400, f"{param}: token ids must be in [0, {vocab}), got {bad[0]}", param=param
            )

    def check_model(self, model: str, param: str | None = None) -> None:
        """A model name must be the one served: else OpenAI's 404."""
        if model != self.backend.model:
            raise APIError(
                404,
                f"The model `{model}` does not exist; this server serves `{self.backend.model}`",
                param=param,
                code="model_not_found",
                kind="invalid_request_error",  # OpenAI's, for this 404
            )

    def check_request(self, req: Sampling) -> None:
        """What a completion request's model checks could not: that it names this model (if any),
        that its length fits this model's window (a longer one is a mistake, not a wish),
        that its token ids are in its vocabulary; and stream_options only with stream."""
        if req.model is not None:  # without one, the one model served (as vLLM, llama.cpp)
            self.check_model(req.model, param="model")
        window, vocab = self.backend.context_window, self.backend.vocab_size
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            value = getattr(req, name, None)
            if value is not None and value > window:
                raise APIError(
                    400,
                    f"{name}: at most the context window ({window} tokens), got {value}",
                    param=name,
                    code="invalid_value",
                )
        for i, token in enumerate(req.stop_token_ids or []):
            if token >= vocab:
                raise APIError(
                    400,
                    f"stop_token_ids.{i}: token ids must be in [0, {vocab}), got {token}",
                    param=f"stop_token_ids.{i}",
                    code="invalid_value",
                )
        for key in req.logit_bias or {}:
            if int(key) >= vocab:
                raise APIError(
                    400,
                    f"logit_bias: token ids must be in [0, {vocab}), got {key}",
                    param="logit_bias",
                    code="invalid_value",
                )
        if req.stream_options is not None and not req.stream:
            raise APIError(400, "stream_options needs stream: true", param="stream_options")

    async def start(
        self,
        ids: list[int],
        params: SamplingParams,
        req: Sampling,
        place: Place,
    ) -> Generation:
        """Submit an admitted request to the engine; the generation then holds its place."""
        # a bad grammar is a 400 now, not an error mid-stream; compiled off the event loop
        # (a large one takes seconds)
        if params.constraint is not None:
            await asyncio.to_thread(self.backend.check, params)
        else:
            self.backend.check(params)
        stream = await self.backend.generate(ids, params)
        if params.constraint is not None:
            stream = ConstrainedStream(stream, req.constraint_field())
        if self.config.fault_marker is not None and req.user == self.config.fault_marker:
            stream = FaultyStream(stream)
        return Generation(stream, place, self.metrics)
