"""Constrained decoding: a request's JSON schema, regex or grammar (Lark, GBNF) enforced
token by token with llguidance's matcher, which gives the tokens allowed next as a mask.
Only rows that carry a constraint pay for it; the others sample as before."""

from __future__ import annotations

import copy
import json
from typing import Any

import torch

from gen.sampling import Constraint, InvalidParam

# JSON as json.dumps writes it: one space after "," and ":", no other whitespace. Without
# it a model may spend its tokens on blank lines between keys and end cut off.
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def compact_json(schema: str) -> str:
    """The schema with JSON_LAYOUT, unless it sets llguidance's options itself."""
    try:
        value = json.loads(schema)
    except ValueError:
        return schema  # llguidance names the problem
    if not isinstance(value, dict) or "x-guidance" in value:
        return schema
    return json.dumps({**value, "x-guidance": JSON_LAYOUT})


class GrammarError(RuntimeError):
    """A constraint that failed while decoding (too costly to lex or parse, or nothing it
    allows): the request's fault, not the engine's."""


class Grammars:
    """What constrained requests share: the model's tokenizer as llguidance reads it, made
    once, on the first constrained request."""

    def __init__(self, tokenizer: Any, vocab: int) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self._ll: Any = None

    def state(self, constraint: Constraint) -> GrammarState:
        import llguidance

        if self._ll is None:
            self._ll = ll_tokenizer(self.tokenizer, self.vocab)
        kind: Any = constraint.kind  # one of CONSTRAINT_KINDS, all names llguidance takes
        text = compact_json(constraint.text) if kind == "json_schema" else constraint.text
        try:
            grammar = llguidance.grammar_from(kind, text)
        except (ValueError, TypeError) as exc:
            raise InvalidParam("constraint", f"bad {constraint.kind}: {exc}") from None
        error = llguidance.LLMatcher.validate_grammar(grammar, self._ll)
        if error:
            raise InvalidParam("constraint", f"bad {constraint.kind}: {error}")
        matcher = llguidance.LLMatcher(self._ll, grammar)
        if constraint.prefix:
            ids = self.tokenizer.encode(constraint.prefix, add_special_tokens=False)
            if matcher.consume_tokens(ids) is False or matcher.is_error():
                raise InvalidParam(
                    "constraint",
                    f"the text already written does not follow the {constraint.kind}: "
                    f"{matcher.get_error()}",
                )
        return GrammarState(matcher, self.vocab)


class GrammarState:
    """One sequence's place in its grammar."""

    def __init__(self, matcher: Any, vocab: int) -> None:
        import llguidance.torch

        self.matcher = matcher
        self.vocab = vocab
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab)  # refilled each step
        self.shifts = torch.arange(32, dtype=torch.int32)

    def allowed(self, width: int) -> torch.Tensor:
        """(width,) bool: the tokens the grammar allows next (ids past its vocab: none)."""
        import llguidance.torch

        llguidance.torch.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        if self.matcher.is_error():  # (a grammar too costly to lex, say): no token is allowed
            raise GrammarError(f"the grammar failed: {self.matcher.get_error()}")
        bits = self.bitmask[0].view(torch.int32)
        mask = ((bits.unsqueeze(-1) >> self.shifts) & 1).bool().flatten()[: self.vocab]  # (vocab,)
        out = torch.zeros(width, dtype=torch.bool)
        n = min(width, self.vocab)
        out[:n] = mask[:n]
        return out

    def consume(self, token: int) -> None:
        if not self.matcher.consume_token(token):
            raise GrammarError(f"the grammar refused token {token}: {self.matcher.get_error()}")

    @property
    def done(self) -> bool:
        """The output is complete: the grammar allows nothing more."""
        return bool(self.matcher.is_stopped())


def ll_tokenizer(tokenizer: Any, vocab: int) -> Any:
    """llguidance's view of a fast tokenizer (transformers' or gen.models.tokenizer's): its
    `tokenizers` pipeline as JSON, without padding or truncation, and its end of text."""
    import llguidance

    try:
        backend = copy.copy(tokenizer.backend_tokenizer)
        backend.no_padding()
        backend.no_truncation()
        return llguidance.LLTokenizer(
            backend.to_str(), n_vocab=vocab, eos_token=tokenizer.eos_token_id
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise InvalidParam(
            "constraint", f"constrained decoding needs a fast (tokenizers) tokenizer: {exc}"
        ) from None
