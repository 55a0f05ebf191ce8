"""A converted model folder's tokenizer read with the `tokenizers` library alone: the part of
transformers' tokenizer that gen calls (encode, decode, special tokens, the chat template),
without importing transformers (0.4 to 0.7 s) or its Python-side bookkeeping of every added
token (0.4 s of Gemma 3's 6,384). Encoding, decoding and chat templates give the same ids and
text as transformers' on the same folder (tests/models/test_tokenizer.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import tokenizers

# the special tokens a tokenizer_config.json names, as transformers hands them to templates
SPECIAL: tuple[str, ...] = (
    "bos_token", "eos_token", "unk_token", "sep_token",
    "pad_token", "cls_token", "mask_token",
)  # fmt: skip
# the settings this class reads the same way transformers does; a folder that sets another
# tokenizer setting is left to transformers (load_tokenizer)
KNOWN = {
    *SPECIAL,
    "added_tokens_decoder",
    "backend",
    "chat_template",
    "clean_up_tokenization_spaces",
    "extra_special_tokens",
    "is_local",
    "local_files_only",
    "model_max_length",
    "tokenizer_class",
}
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "  # marks where an open final message ends


class Tokenizer:
    """A `tokenizers.Tokenizer` with the special tokens and chat template of its folder."""

    def __init__(
        self, backend: tokenizers.Tokenizer, settings: Mapping[str, Any], chat_template: str | None
    ) -> None:
        self.backend_tokenizer = backend
        self.chat_template = chat_template
        self.special_tokens_map: dict[str, str] = {}
        for name in SPECIAL:
            value = settings.get(name)
            if isinstance(value, dict):  # an AddedToken written out: {"content": ...}
                value = value.get("content")
            if isinstance(value, str):
                self.special_tokens_map[name] = value
        extra = settings.get("extra_special_tokens") or []
        self.extra_special_tokens = [t for t in extra if isinstance(t, str)]

    @classmethod
    def from_folder(cls, path: Path) -> Tokenizer:
        """The folder's tokenizer.json, tokenizer_config.json and chat template (its
        chat_template.jinja, else the config's own)."""
        settings = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        template_file = path / "chat_template.jinja"
        template = settings.get("chat_template")
        if template_file.is_file():
            template = template_file.read_text(encoding="utf-8")
        elif isinstance(template, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        backend = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        return cls(backend, settings, template if isinstance(template, str) else None)

    # the vocabulary and special tokens

    def __len__(self) -> int:
        return int(self.backend_tokenizer.get_vocab_size(with_added_tokens=True))

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary without the added tokens, as transformers counts it."""
        return int(self.backend_tokenizer.get_vocab_size(with_added_tokens=False))

    @property
    def added_tokens_decoder(self) -> dict[int, tokenizers.AddedToken]:
        return dict(self.backend_tokenizer.get_added_tokens_decoder())

    def _token_id(self, name: str) -> int | None:
        token = self.special_tokens_map.get(name)
        found = self.backend_tokenizer.token_to_id(token) if token is not None else None
        return int(found) if found is not None else None

    @property
    def eos_token_id(self) -> int | None:
        return self._token_id("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        return self._token_id("bos_token")

    @property
    def unk_token_id(self) -> int | None:
        return self._token_id("unk_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._token_id("pad_token")

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens_map.get("eos_token")

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens_map.get("bos_token")

    @property
    def all_special_ids(self) -> list[int]:
        tokens = [*self.special_tokens_map.values(), *self.extra_special_tokens]
        ids = (self.backend_tokenizer.token_to_id(t) for t in dict.fromkeys(tokens))
        return [int(i) for i in ids if i is not None]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        """A token's id (the unknown token's, or None, where the vocabulary lacks it); a list
        for a list."""
        if isinstance(tokens, str):
            found = self.backend_tokenizer.token_to_id(tokens)
            return int(found) if found is not None else self.unk_token_id
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    # text

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        encoding = self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return list(encoding.ids)

    def decode(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> str:
        ids = [ids] if isinstance(ids, int) else [int(i) for i in ids]
        return str(self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens))

    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        tokenize: bool = True,
        return_dict: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The conversation rendered by the chat template as transformers renders it (the same
        sandbox, filters and special-token variables), tokenized without special tokens of its
        own where `tokenize`. continue_final_message leaves the last message open."""
        if self.chat_template is None:
            raise ValueError("the tokenizer has no chat template")
        if continue_final_message and add_generation_prompt:
            raise ValueError("continue_final_message and add_generation_prompt exclude each other")
        if not conversation:
            raise ValueError("cannot apply the chat template to an empty conversation")
        messages = [{k: v for k, v in m.items() if v is not None} for m in conversation]
        final = ""
        if continue_final_message:
            final = str(messages[-1].get("content", ""))
            messages[-1] = {**messages[-1], "content": final + CONTINUE_TAG}
        text = _compiled(self.chat_template).render(
            messages=messages,
            tools=kwargs.pop("tools", None),
            documents=kwargs.pop("documents", None),
            add_generation_prompt=add_generation_prompt,
            **{**self.special_tokens_map, **kwargs},
        )
        if continue_final_message:
            if final.strip() not in text or CONTINUE_TAG.strip() not in text:
                raise ValueError("the chat template drops part of the final message to continue")
            at = text.rindex(CONTINUE_TAG.strip())
            spaced = text[at : at + len(CONTINUE_TAG)] == CONTINUE_TAG
            text = text[:at] if spaced else text[:at].rstrip()
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)
        return {"input_ids": ids} if return_dict else ids


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """The template in the sandbox transformers renders chat templates in: trimmed blocks,
    loop controls, a tojson that keeps non-ASCII text, raise_exception and strftime_now."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    class Generation(jinja2.ext.Extension):
        """`{% generation %}…{% endgeneration %}` (transformers marks the assistant's
        tokens with it for training): the body as written."""

        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it so)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, Generation]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def plain(settings: Mapping[str, Any]) -> bool:
    """Whether a folder's tokenizer_config.json asks for nothing this class does not do: the
    plain fast backend, no code of its own, no setting it does not read, no clean-up of
    spaces."""
    return (
        settings.get("tokenizer_class") == "TokenizersBackend"
        and set(settings) <= KNOWN
        and not settings.get("clean_up_tokenization_spaces")
    )
