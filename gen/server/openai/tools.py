"""OpenAI's tool calling on chat completions: the tools a request offers, the grammar that
holds the output to calls of them, and the output read back as calls.

The model calls tools by writing one JSON list, `[{"name": …, "arguments": {…}}, …]` (one
item unless parallel_tool_calls), each item held to its tool's parameters schema. With
tool_choice "required" or a named function the output is that list; with "auto" it is
that list or text that does not begin with "[" (or white space), so the first character
says which it is."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gen.sampling import Constraint, InvalidParam
from gen.server.openai.responses import CallFunction, ToolCallOut


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FunctionDefinition(_Request):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Request):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class FunctionName(_Request):
    name: str


class NamedToolChoice(_Request):
    type: Literal["function"] = "function"
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


def offered(tools: list[Tool], choice: ToolChoice | None) -> list[Tool]:
    """The tools the model may call: none under "none", the named one alone under a named
    choice (a 400 if no tool has that name), else all (the default choice is "auto")."""
    if choice == "none":
        return []
    if isinstance(choice, NamedToolChoice):
        named = [t for t in tools if t.function.name == choice.function.name]
        if not named:
            raise InvalidParam(
                "tool_choice", f"tool_choice names {choice.function.name!r}, not one of tools"
            )
        return named
    if choice == "required" and not tools:
        raise InvalidParam("tool_choice", 'tool_choice "required" needs tools')
    return tools


def _call_schema(tool: Tool) -> dict[str, Any]:
    parameters = tool.function.parameters or {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def calls_schema(tools: list[Tool], parallel: bool) -> dict[str, Any]:
    """The JSON schema of the call list: one item per call, each a call of one tool."""
    items = [_call_schema(t) for t in tools]
    schema: dict[str, Any] = {
        "type": "array",
        "items": items[0] if len(items) == 1 else {"anyOf": items},
        "minItems": 1,
        "x-guidance": {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "},
    }
    if not parallel:
        schema["maxItems"] = 1
    return schema


def tool_constraint(tools: list[Tool], required: bool, parallel: bool) -> Constraint:
    """The output held to calls of `tools` (`required`), or to those calls or text."""
    schema = json.dumps(calls_schema(tools, parallel), ensure_ascii=False)
    if required:
        return Constraint("json_schema", schema)
    return Constraint(
        "lark", f"start: TEXT | calls\nTEXT: /[^\\[\\s](?s:.)*/\ncalls: %json {schema}"
    )


def template_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """The tools as chat templates read them (transformers' `tools`)."""
    return [t.model_dump(exclude_none=True) for t in tools]


def read_calls(text: str) -> list[ToolCallOut] | None:
    """The calls `text` holds (the call list the grammar allows), or None where it is text
    (or a list cut short by max_tokens)."""
    if not text.startswith("["):
        return None
    try:
        items = json.loads(text)
    except ValueError:
        return None
    calls = []
    for item in items:
        arguments = json.dumps(item["arguments"], ensure_ascii=False)
        function = CallFunction(name=item["name"], arguments=arguments)
        calls.append(ToolCallOut(id=f"call_{uuid.uuid4().hex[:24]}", function=function))
    return calls
