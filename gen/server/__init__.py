"""The HTTP edge: the engine as an OpenAI-compatible API (`gen serve`). Nothing imports it."""
