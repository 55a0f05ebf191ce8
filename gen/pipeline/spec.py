"""The pipeline schema (docs/design.md §8) as pydantic models: types and ranges of single values.

Cross-references (ids, dependencies, templates, variables) are checked in validate.py.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from gen.text.language import Language

DEFAULT_MODEL = "smollm2-135m"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FOREACH = re.compile(r"^\s*(?:sections\.(?P<section>\w+)\.items|inputs\.(?P<input>\w+))\s*$")

Continuation = Literal["kv", "prefix", "chat"]
HeadingMode = Literal["demote", "strip", "keep"]
ExportFormat = Literal["md", "html", "docx", "pdf"]
# model: keep the model's own [n] markers that point at a passage it was shown; attribute:
# also cite, after a sentence without one, the shown passage that supports it (support >=
# gen.text.support.SUPPORTED); off: passages shown, no markers kept, no References
Citations = Literal["attribute", "model", "off"]


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
# infinities are refused: a remote server gets the settings as JSON, which has none
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
TopP = Annotated[float, Field(gt=0, le=1)]
UnitFloat = Annotated[float, Field(ge=0, le=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]
DryBase = Annotated[float, Field(gt=1, allow_inf_nan=False)]


def _ngram_size(value: Any) -> Any:
    if value == 1:
        raise ValueError("must be 0 (off) or >= 2; 1 would ban every token already generated")
    return value


NgramSize = Annotated[int, Field(ge=0), AfterValidator(_ngram_size)]
Seed = Annotated[int, Field(ge=0, lt=2**63)]
WordCount = PositiveInt | str  # a number, or a template that renders one per instance
# a round's max_tokens past which no context window holds it: the longest windows models
# ship with are about 100 million tokens, and llama.cpp numbers positions in 32 bits
MAX_TOKENS = 2**31 - 1


def _max_tokens(value: int) -> int:
    if value > MAX_TOKENS:
        got = f"{value:,}" if value < 10**30 else f"a number of {len(str(value)):,} digits"
        raise ValueError(
            f"must be at most {MAX_TOKENS:,} (2**31 - 1), got {got}: a round writes no "
            "more tokens than the context window holds, and no model's window holds that many"
        )
    return value


def _stop_string(value: str) -> str:
    if not value:
        raise ValueError(
            'a stop string must not be empty ("" marks no place in the text, and the engine '
            "refuses it); leave it out, or write `stop: []` for none"
        )
    return value


MaxTokens = Annotated[int, Field(gt=0), AfterValidator(_max_tokens)]
StopList = Annotated[list[Annotated[str, AfterValidator(_stop_string)]], BeforeValidator(_as_list)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GenerationSettings(_Strict):
    """Per-round generation settings: `defaults:` and, field by field, each section."""

    max_tokens: MaxTokens = 256
    max_rounds: PositiveInt | None = None  # None: planned from the target (length.py)
    temperature: NonNegativeFloat = 0.7
    top_p: TopP = 1.0
    top_k: NonNegativeInt = 0
    min_p: UnitFloat = 0.0
    repetition_penalty: PositiveFloat = 1.0
    frequency_penalty: Penalty = 0.0
    presence_penalty: Penalty = 0.0
    no_repeat_ngram_size: NgramSize = 0
    dry_multiplier: NonNegativeFloat = 0.8  # DRY on by default: long texts loop without it
    dry_base: DryBase = 1.75
    dry_allowed_length: PositiveInt = 2
    dry_penalty_last_n: NonNegativeInt = 0
    seed: Seed | None = None
    stop: StopList = Field(default_factory=list)
    min_tokens: NonNegativeInt = 0
    continuation: Continuation = "kv"
    loop_retries: NonNegativeInt = 2  # retries after a round is cut for repeating itself
    # the script the text is held to: zh (CJK), en (Latin), any (none), auto (the prompt's)
    language: Language = "auto"
    # a prose section with a target longer than one answer is written from a plan of points
    # (auto); true: always when it has a target; false: never (gen/pipeline/run/points.py)
    plan: bool | Literal["auto"] = "auto"
    system: str | None = None  # a Jinja template, like prompts


GENERATION_FIELDS: tuple[str, ...] = tuple(GenerationSettings.model_fields)
_NULLABLE = frozenset({"seed", "system", "max_rounds"})


class RemoteSettings(_Strict):
    """How an `openai:` model's servers are called: per request, how long a server may stay
    silent, how often a failed request is tried again, how many requests each server gets
    at once."""

    timeout: PositiveFloat = 120.0  # seconds without a byte before the request is dropped
    max_retries: NonNegativeInt = 5  # tries after the first, with exponential backoff
    concurrency: PositiveInt = 16  # requests in flight per server


class Format(_Strict):
    """A section's `format:`: its output held, token by token, to a JSON schema, a regular
    expression or a grammar (Lark, or GBNF: told apart by its `::=`)."""

    json_schema: dict[str, Any] | str | None = None
    regex: str | None = None
    grammar: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Format:
        given = [k for k in ("json_schema", "regex", "grammar") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give one of json_schema, regex, grammar; got {given or 'none'}")
        if isinstance(self.json_schema, str):
            try:
                json.loads(self.json_schema)
            except ValueError as exc:
                raise ValueError(f"json_schema: not JSON: {exc}") from None
        return self

    def kind_and_text(self) -> tuple[str, str]:
        """The constraint's kind (as gen.sampling.Constraint names it) and text."""
        if self.json_schema is not None:
            schema = self.json_schema
            return "json_schema", schema if isinstance(schema, str) else json.dumps(schema)
        if self.regex is not None:
            return "regex", self.regex
        grammar = self.grammar or ""
        return ("gbnf" if "::=" in grammar else "lark"), grammar


class ContextSettings(_Strict):
    """The context budget: the window (tokens), what is kept free for the answer, and the
    most a section's source passages may take of the prompt (None: a third of the room)."""

    window: int | Literal["auto"] = "auto"
    reserve: NonNegativeInt = 256
    sources_budget: PositiveInt | None = None

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, value: Any) -> Any:
        if value == "auto" or (type(value) is int and value > 0):
            return value
        raise ValueError(f"must be 'auto' or an integer > 0, got {value!r}")

    def window_for(self, model_length: int) -> int:
        """The window a run gets: the model's context length, or `window` where smaller."""
        return model_length if self.window == "auto" else min(self.window, model_length)


class SourcesAdd(_Strict):
    """`sources: {add: [...]}`: the pipeline's sources and these."""

    add: StopList


class Section(_Strict):
    """One `sections:` entry; a `foreach` section fans out into one instance per item."""

    id: str
    title: str | None = None  # a Jinja template; default: the fan-out item, else the id
    prompt: str | None = None  # inline Jinja template
    template: str | None = None  # a template file name
    depends_on: list[str] = Field(default_factory=list)
    foreach: str | None = None  # sections.<id>.items | inputs.<name>
    parse: Literal["text", "list", "json"] = "text"
    # parse: list / json: how many items (numbers or templates); the output is held to them
    max_items: WordCount | None = None
    min_items: WordCount | None = None  # default: max_items (exactly that many)
    exclude: list[str] = Field(default_factory=list)  # titles the pipeline writes itself
    # the output held to a schema, regex or grammar; "prose": plain paragraphs (where the
    # backend holds grammars itself); "none": a list or JSON left free
    format: Format | Literal["none", "prose"] | None = None
    context: list[str] = Field(default_factory=list)  # section ids, "previous", "all"
    hidden: bool | None = None  # left out of the default document; default: parse == list
    headings: HeadingMode = "demote"  # headings in the text: demote | strip | keep
    target_words: WordCount | None = None
    min_words: WordCount | None = None
    max_words: WordCount | None = None
    # generation overrides; None: inherit from `defaults:`
    max_tokens: MaxTokens | None = None
    max_rounds: PositiveInt | None = None
    temperature: NonNegativeFloat | None = None
    top_p: TopP | None = None
    top_k: NonNegativeInt | None = None
    min_p: UnitFloat | None = None
    repetition_penalty: PositiveFloat | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    no_repeat_ngram_size: NgramSize | None = None
    dry_multiplier: NonNegativeFloat | None = None
    dry_base: DryBase | None = None
    dry_allowed_length: PositiveInt | None = None
    dry_penalty_last_n: NonNegativeInt | None = None
    seed: Seed | None = None
    stop: StopList | None = None
    min_tokens: NonNegativeInt | None = None
    continuation: Continuation | None = None
    loop_retries: NonNegativeInt | None = None
    language: Language | None = None
    plan: bool | Literal["auto"] | None = None
    system: str | None = None
    # the files its passages come from: None, the pipeline's; a list, these instead; "none"
    sources: list[str] | Literal["none"] | SourcesAdd | None = None
    sources_budget: PositiveInt | None = None  # tokens; default: context.sources_budget

    @field_validator("sources", mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) and value != "none" else value

    @field_validator("id")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not IDENTIFIER.match(value):
            raise ValueError(f"must be an identifier (letters, digits, _), got {value!r}")
        return value

    @property
    def in_document(self) -> bool:
        return not (self.parse != "text" if self.hidden is None else self.hidden)

    def foreach_target(self) -> tuple[Literal["sections", "inputs"], str] | None:
        """("sections", id) or ("inputs", name) for `foreach:`; None without one.
        Raises ValueError for any other expression."""
        if self.foreach is None:
            return None
        match = _FOREACH.match(self.foreach)
        if match is None:
            raise ValueError(
                f"must be `sections.<id>.items` or `inputs.<name>`, got {self.foreach!r}"
            )
        if match["section"]:
            return "sections", match["section"]
        return "inputs", match["input"]

    def overrides(self) -> dict[str, Any]:
        """The generation settings this section sets itself."""
        out = {}
        for name in GENERATION_FIELDS:
            value = getattr(self, name)
            if name in self.model_fields_set and (value is not None or name in _NULLABLE):
                out[name] = value
        return out


class DocumentSpec(_Strict):
    """How the finished sections become one document; a bare string names a template file."""

    title: str | None = None  # a Jinja template; default: the pipeline name
    template: str | None = None  # a template file name
    inline: str | None = None  # an inline Jinja template
    # written beside document.md when the run completes (gen export does it afterwards)
    formats: list[ExportFormat] = Field(default_factory=lambda: list[ExportFormat](["md"]))

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"template": value} if isinstance(value, str) else value


class Pipeline(_Strict):
    """A whole pipeline file; build it with `load_pipeline`, which also runs the static checks."""

    name: str = "pipeline"
    model: str = DEFAULT_MODEL
    base_url: str | list[str] | None = None  # a list: replicas, the least busy is used
    api_key_env: str | None = None
    tokenizer: str | None = None  # a local Hugging Face tokenizer folder to count tokens with
    remote: RemoteSettings = Field(default_factory=RemoteSettings)
    defaults: GenerationSettings = Field(default_factory=GenerationSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    inputs: dict[str, Any] = Field(default_factory=dict)
    # files, folders and globs (templates) relative to the pipeline's folder (gen.sources)
    sources: StopList = Field(default_factory=list)
    citations: Citations = "attribute"
    sections: list[Section] = Field(min_length=1)
    document: DocumentSpec = Field(default_factory=DocumentSpec)
    strict: bool = False  # `gen run` and `gen batch` exit 1 when a section failed (--strict)

    _file: str = PrivateAttr(default="<pipeline>")
    _source: str = PrivateAttr(default="")  # the YAML text it was loaded from
    _templates: Any = PrivateAttr(default=None)  # a templates.TemplateSet, set by load_pipeline
    _library: Any = PrivateAttr(default=None)  # a sources.Library, read by load_pipeline

    @field_validator("citations", mode="before")
    @classmethod
    def _citations_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare off as false

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if (
            not value.strip()
            or value in (".", "..")
            or re.search(r"[/\\\x00-\x1f\x7f]", value)
            or len(value.encode()) > 200
        ):
            raise ValueError(f"must be usable as a folder name, got {value!r}")
        return value

    @property
    def file(self) -> str:
        """The pipeline file as given to load_pipeline (or '<pipeline>' for text)."""
        return self._file

    @property
    def source_text(self) -> str:
        return self._source

    def section(self, section_id: str) -> Section:
        for section in self.sections:
            if section.id == section_id:
                return section
        raise KeyError(section_id)

    def settings_for(self, section: Section | str) -> GenerationSettings:
        """`defaults:` with the section's own settings laid over them."""
        if isinstance(section, str):
            section = self.section(section)
        return self.defaults.model_copy(update=section.overrides(), deep=True)
