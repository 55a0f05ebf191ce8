"""Backends: the built-in engine or a remote OpenAI-compatible server, behind one protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gen.backends.base import Backend, Delta, Message, Stream
from gen.errors import ModelError

if TYPE_CHECKING:
    from gen.engine.config import EngineConfig

__all__ = ["Backend", "Delta", "Message", "Stream", "open_backend"]


def open_backend(
    spec: str,
    base_url: str | list[str] | None = None,
    api_key_env: str | None = None,
    context_window: int | None = None,
    engine: EngineConfig | None = None,
    tokenizer: str | None = None,
    timeout: float = 120.0,
    max_retries: int = 5,
    concurrency: int = 16,
) -> Backend:
    """A backend for a model spec: `openai:<model>` is remote, anything else loads locally
    and runs as `engine` says (None: EngineConfig's defaults; the CLI passes
    EngineConfig.from_env). A GGUF file is checked from its header before the engine (and
    torch) is imported: a file gen cannot run fails at once."""
    from gen.models import check, resolve

    ms = resolve(spec)
    check(ms)
    if ms.kind == "openai":
        import os

        from gen.backends.openai import DEFAULT_WINDOW, OpenAIBackend

        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if key is None:
                raise ModelError(f"environment variable {api_key_env} (api_key_env) is not set")
        assert ms.remote_model is not None
        return OpenAIBackend(
            ms.remote_model,
            base_url,
            key,
            context_window or DEFAULT_WINDOW,
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            tokenizer=tokenizer,
        )
    from gen.backends.local import LocalBackend
    from gen.models import load_model

    return LocalBackend(load_model(ms, engine), engine)
