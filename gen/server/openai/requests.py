"""The OpenAI API's requests as pydantic models (openai_responses has the answers; both are
what /openapi.json publishes).

Requests carry OpenAI's parameters, vLLM's extras where the engine has them, and gen's own
samplers (DRY, no-repeat n-gram). Fields a request names that are not here are ignored, as
vLLM does; a known field with a value gen cannot honour is a 400.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gen.sampling import Constraint, InvalidParam, SamplingParams, build_sampling_params
from gen.server.openai.tools import Tool, ToolChoice, offered, template_tools, tool_constraint

MAX_TOP_LOGPROBS = 20  # OpenAI's for chat, vLLM's for text completions too
SEED_LIMIT = 2**63  # any int64, as vLLM takes; torch.Generator wraps negatives mod 2**64
RANDOM_SEED = -1  # llama.cpp's "no seed": a seed drawn at random

Penalty = Annotated[float, Field(ge=-2, le=2)]
Probability = Annotated[float, Field(ge=0, le=1)]
NonEmpty = Annotated[str, Field(min_length=1)]
TokenId = Annotated[int, Field(ge=0)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Request):
    include_usage: bool = False


class TextPart(_Request):
    type: Literal["text"]
    text: str


class FunctionCall(_Request):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(_Request):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall

    def as_template_takes(self) -> dict[str, Any]:
        """The call as chat templates read it: arguments as an object where they parse as
        one (as vLLM passes them), else as the text sent."""
        try:
            arguments: Any = json.loads(self.function.arguments)
        except ValueError:
            arguments = self.function.arguments
        if not isinstance(arguments, dict):
            arguments = self.function.arguments
        function = {"name": self.function.name, "arguments": arguments}
        return {"id": self.id, "type": self.type, "function": function}


class ChatMessage(_Request):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None  # an assistant turn that called tools
    tool_call_id: str | None = None  # a tool turn: the result of this call

    @model_validator(mode="after")
    def _has_content(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is required (null only in an assistant turn with tool_calls)")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("tool_calls belong to an assistant turn")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool turn needs the tool_call_id it answers")
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class JsonSchemaFormat(_Request):
    name: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(_Request):
    """OpenAI's: plain text, any JSON object, or JSON valid against a schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    def constraint(self) -> Constraint | None:
        if self.type == "json_object":
            return Constraint("json_schema", '{"type": "object"}')
        if self.type == "json_schema":
            if self.json_schema is None:
                raise InvalidParam(
                    "response_format.json_schema", "type json_schema needs a json_schema"
                )
            return Constraint("json_schema", json.dumps(self.json_schema.schema_))
        return None


def _regex_literal(text: str) -> str:
    """`text` as a regular expression that matches only it, inside a Lark /.../ literal:
    ASCII punctuation and space escaped, control characters as \\x{..}."""
    out = []
    for ch in text:
        if ch.isalnum() or (ord(ch) > 127 and ch.isprintable()):
            out.append(ch)
        elif ch.isprintable() and ord(ch) < 128:
            out.append("\\" + ch)
        else:
            out.append(f"\\x{{{ord(ch):x}}}")
    return "".join(out)


class StructuredOutputs(_Request):
    """vLLM's: a JSON schema, a regex, a grammar (GBNF when it has `::=`, else Lark), or a
    choice among strings."""

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")
    regex: str | None = None
    grammar: str | None = None
    choice: list[str] | None = None

    def constraint(self) -> Constraint | None:
        given = [n for n in ("json_", "regex", "grammar", "choice") if getattr(self, n) is not None]
        if len(given) > 1:
            raise InvalidParam("structured_outputs", "give one of json, regex, grammar, choice")
        if self.json_ is not None:
            text = self.json_ if isinstance(self.json_, str) else json.dumps(self.json_)
            return Constraint("json_schema", text)
        if self.regex is not None:
            return Constraint("regex", self.regex)
        if self.grammar is not None:
            return Constraint("gbnf" if "::=" in self.grammar else "lark", self.grammar)
        if self.choice is not None:
            if not self.choice:
                raise InvalidParam("structured_outputs.choice", "choice needs a string")
            # one terminal whose pattern is every choice: a list of 20,000 stays one lexeme
            # (as alternatives of the parser, each would be an item of its row)
            options = "|".join(_regex_literal(c) for c in self.choice)
            return Constraint("lark", f"start: CHOICE\nCHOICE: /(?:{options})/")
        return None


class Sampling(_Request):
    """What every generation request shares (chat and text completions, responses)."""

    model: str | None = Field(default=None, description="the one model served, if given")
    structured_outputs: StructuredOutputs | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: Annotated[int, Field(ge=-SEED_LIMIT, lt=SEED_LIMIT, description="-1: random")] | None = (
        None
    )
    stop: NonEmpty | list[NonEmpty] | None = None
    n: Annotated[int, Field(ge=1, le=1, description="gen serve answers with one choice")] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    logit_bias: dict[str, Annotated[float, Field(ge=-100, le=100)]] | None = None
    user: str | None = None
    # vLLM's extras
    top_k: Annotated[int, Field(ge=-1, description="-1 or 0: off")] | None = None
    min_p: Probability | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    min_tokens: Annotated[int, Field(ge=0)] | None = None
    ignore_eos: bool = False
    stop_token_ids: list[Annotated[int, Field(ge=0)]] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    # gen's samplers against repetition
    no_repeat_ngram_size: Literal[0] | Annotated[int, Field(ge=2)] | None = Field(
        default=None, description="0: off; n >= 2 bans repeating any generated n-gram"
    )
    dry_multiplier: Annotated[float, Field(ge=0)] | None = None
    dry_base: Annotated[float, Field(gt=1)] | None = None
    dry_allowed_length: Annotated[int, Field(ge=1)] | None = None
    dry_penalty_last_n: Annotated[int, Field(ge=0)] | None = None
    dry_sequence_breakers: list[NonEmpty] | None = None

    @field_validator("logit_bias")
    @classmethod
    def _token_ids(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key in value or {}:
            if not (key.isascii() and key.isdigit() and len(key) <= 18):
                raise ValueError(f"keys must be token ids, got {key[:40]!r}")
        return value

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens

    def sampling_params(self, default_max_tokens: int, logprobs: int | None) -> SamplingParams:
        """The engine's settings for this request; max_tokens defaults to
        `default_max_tokens`. Raises InvalidParam for a combination out of range."""
        return build_sampling_params(
            self,
            max_tokens=self.requested_max_tokens() or default_max_tokens,
            top_k=max(self.top_k or 0, 0),
            seed=None if self.seed == RANDOM_SEED else self.seed,
            stop=[self.stop] if isinstance(self.stop, str) else self.stop,
            logprobs=logprobs,
            constraint=self.constraint(),
        )

    def constraint_field(self) -> str:
        """The parameter the constraint came from, for errors about it."""
        fmt = getattr(self, "response_format", None)
        return "response_format" if fmt is not None and fmt.type != "text" else "structured_outputs"

    def constraint(self) -> Constraint | None:
        """What the output must follow: response_format (chat) or vLLM's structured_outputs."""
        fmt = getattr(self, "response_format", None)
        found = [
            c
            for c in (
                fmt.constraint() if fmt is not None else None,
                self.structured_outputs.constraint() if self.structured_outputs else None,
            )
            if c is not None
        ]
        if len(found) > 1:
            raise InvalidParam("structured_outputs", "give response_format or structured_outputs")
        return found[0] if found else None


class ChatCompletionRequest(Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = Field(
        default=None, description='default "auto" with tools, else "none"'
    )
    parallel_tool_calls: bool = True
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    response_format: ResponseFormat | None = None
    # vLLM's: leave the last (assistant) message open and continue it (`prefix` rounds)
    continue_final_message: bool = False
    add_generation_prompt: bool = True

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def wants_generation_prompt(self) -> bool:
        """add_generation_prompt, off by default where the final message is continued."""
        if self.continue_final_message and "add_generation_prompt" not in self.model_fields_set:
            return False
        return self.add_generation_prompt

    def engine_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    def offered_tools(self) -> list[Tool]:
        """The tools the model may call (see gen.server.openai.tools.offered); none unless
        `tools` has some or tool_choice asks for a call."""
        if not self.tools and self.tool_choice in (None, "none"):
            return []
        return offered(self.tools or [], self.tool_choice)

    def template_tools(self) -> list[dict[str, Any]] | None:
        return template_tools(self.offered_tools()) or None

    def constraint_field(self) -> str:
        return "tools" if self.offered_tools() else super().constraint_field()

    def constraint(self) -> Constraint | None:
        """The tool-call grammar when tools are offered (no other constraint with it),
        else response_format or structured_outputs."""
        tools = self.offered_tools()
        other = super().constraint()
        if not tools:
            return other
        if other is not None:
            raise InvalidParam("tools", "tools cannot be combined with another constraint")
        required = self.tool_choice not in (None, "auto")
        return tool_constraint(tools, required, self.parallel_tool_calls)


class CompletionRequest(Sampling):
    prompt: str | list[str] | list[TokenId] | list[list[TokenId]] = Field(
        description="text, token ids, or a list of either: one choice per prompt"
    )
    echo: bool = False
    logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None

    def engine_logprobs(self) -> int | None:
        return self.logprobs

    def prompts(self) -> list[str | list[int]]:
        """Each prompt: a text or its token ids (one list of ids is one prompt)."""
        prompt = self.prompt
        if isinstance(prompt, str):
            return [prompt]
        if prompt and all(isinstance(p, int) for p in prompt):
            return [prompt]  # type: ignore[list-item]
        return list(prompt)  # type: ignore[arg-type]
