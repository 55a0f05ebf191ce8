"""Constrained decoding with the bundled model: a regex, a JSON schema, a Lark and a GBNF
grammar held token by token (llguidance's mask), in one batch with an unconstrained row
that comes out as it does alone; a bad grammar is an InvalidParam naming the problem."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import torch

from gen.engine import Engine, SamplingParams
from gen.engine.chat import encode_chat
from gen.engine.grammar import GrammarError
from gen.engine.sampler import sample
from gen.sampling import Constraint, InvalidParam

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 30},
        "population": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["海", "山", "😀"]}, "maxItems": 3},
    },
    "required": ["city", "population", "tags"],
    "additionalProperties": False,
}
LARK = 'start: "Answer: " ("yes" | "no") "."'
GBNF = 'root ::= "สวัสดี " [0-9] [0-9]'


def test_the_mask_leaves_only_allowed_ids() -> None:
    logits = torch.tensor([[5.0, 1.0, 0.5, -1.0], [5.0, 1.0, 0.5, -1.0]])
    only = torch.tensor([False, False, True, True])
    params = [SamplingParams(temperature=0), SamplingParams(temperature=1.0, seed=1)]
    gens = [None, torch.Generator().manual_seed(1)]
    for _ in range(20):
        tokens = sample(logits, params, gens, [None, None], [(), ()], None, [only, only])
        assert tokens[0] == 2 and tokens[1] in (2, 3)
    assert sample(logits, params[:1], gens[:1], [None], [()], None, [None]) == [0]


@pytest.mark.real_model
def test_constrained_rows_beside_a_free_one(real_model: Any) -> None:
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=8)

    def ids(text: str) -> list[int]:
        return encode_chat(real_model.tokenizer, [{"role": "user", "content": text}])

    free = SamplingParams(max_tokens=40, temperature=0)
    asks = [
        (ids("Give a date."), Constraint("regex", r"20[0-9]{2}-[01][0-9]-[0-3][0-9]")),
        (ids("Describe a city as JSON."), Constraint("json_schema", json.dumps(SCHEMA))),
        (ids("Is the sea salty?"), Constraint("lark", LARK)),
        (ids("Greet me in Thai with a number."), Constraint("gbnf", GBNF)),
        (ids("Write one sentence about rain."), None),
    ]
    params = [
        SamplingParams(max_tokens=120, temperature=0.8, seed=n, constraint=c)
        if c is not None
        else free
        for n, (_, c) in enumerate(asks)
    ]
    done = engine.generate([p for p, _ in asks], params)
    date, city, answer, greeting, sentence = (d.text for d in done)
    assert re.fullmatch(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", date), date
    value = json.loads(city)
    assert set(value) == {"city", "population", "tags"} and isinstance(value["population"], int)
    assert len(value["city"]) <= 30 and set(value["tags"]) <= {"海", "山", "😀"}
    assert answer in ("Answer: yes.", "Answer: no."), answer
    assert re.fullmatch(r"สวัสดี [0-9]{2}", greeting), greeting
    assert all(d.finish_reason == "stop" for d in done[:4])
    (alone,) = engine.generate([asks[4][0]], [free])
    assert sentence == alone.text  # the free row samples as it does without neighbours


@pytest.mark.real_model
def test_a_bad_grammar_names_the_problem(real_model: Any) -> None:
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=2)
    prompt = encode_chat(real_model.tokenizer, [{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidParam, match="bad regex") as info:
        engine.add_request(prompt, SamplingParams(constraint=Constraint("regex", "(")))
    assert info.value.param == "constraint"
    with pytest.raises(InvalidParam, match="a constraint is one of"):
        Constraint("xml", "<a/>")


@pytest.mark.real_model
def test_a_grammar_that_fails_mid_batch_ends_its_request_alone(real_model: Any) -> None:
    """A regex too costly to lex fails at its first tokens, in the step it shares with a
    free row: that request ends with the error, the free row goes on as it would alone,
    and no memory is held afterwards."""
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=4)
    prompt = encode_chat(real_model.tokenizer, [{"role": "user", "content": "写一句关于雨的话 🌧"}])
    free = SamplingParams(max_tokens=12, temperature=0)
    (alone,) = engine.generate([prompt], [free])
    too_costly = Constraint("regex", "a{99999999}")
    costly = SamplingParams(max_tokens=12, temperature=0, constraint=too_costly)
    engine.add_request(prompt, free, request_id="free")
    engine.add_request(prompt, costly, request_id="costly")
    outs: dict[str, list[Any]] = {"free": [], "costly": []}
    while engine.has_unfinished():
        for out in engine.step():
            outs[out.request_id].append(out)
    (failed,) = outs["costly"]
    assert isinstance(failed.error, GrammarError) and failed.finished
    assert failed.finish_reason == "abort" and "the grammar" in str(failed.error)
    assert all(o.error is None for o in outs["free"]) and outs["free"][-1].finished
    assert [t for o in outs["free"] for t in o.token_ids] == alone.token_ids
    assert engine.requests == {} and engine.runner.slots.used == 0
    with pytest.raises(GrammarError):  # generate() raises it, and leaves nothing running
        engine.generate([prompt, prompt], [free, costly])
    assert engine.requests == {} and not engine.has_unfinished()


@pytest.mark.real_model
def test_a_constraint_goes_on_past_text_already_written(real_model: Any) -> None:
    """A round that continues cut-back text: the grammar reads the prefix first, so the new
    tokens complete it; a prefix the grammar refuses is an InvalidParam."""
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=2)
    prompt = encode_chat(real_model.tokenizer, [{"role": "user", "content": "列出三种水果。"}])
    grammar = 'start: "1. 苹果\\n2. " FRUIT "\\n3. " FRUIT "\\n"\nFRUIT: /[^\\n0-9]{1,8}/'
    written = "1. 苹果\n2. "
    params = SamplingParams(
        max_tokens=60, temperature=0.9, seed=4, constraint=Constraint("lark", grammar, written)
    )
    (done,) = engine.generate([prompt], [params])
    assert re.fullmatch(r"[^\n0-9]{1,8}\n3\. [^\n0-9]{1,8}\n", done.text), done.text
    assert done.finish_reason == "stop"
    bad = Constraint("lark", grammar, "1. 香蕉\n")
    with pytest.raises(InvalidParam, match="does not follow"):
        engine.add_request(prompt, SamplingParams(constraint=bad))


@pytest.mark.real_model
def test_json_is_laid_out_as_json_dumps_writes_it(real_model: Any) -> None:
    """No blank lines or runs of spaces between keys: a small model cannot spend its tokens
    on whitespace. A schema that sets llguidance's own layout keeps it."""
    engine = Engine(real_model.model, real_model.tokenizer, max_slots=4)
    prompt = encode_chat(real_model.tokenizer, [{"role": "user", "content": "一个城市，JSON。"}])
    schema = json.dumps(SCHEMA)
    params = [
        SamplingParams(
            max_tokens=80, temperature=1.0, seed=s, constraint=Constraint("json_schema", schema)
        )
        for s in range(4)
    ]
    for done in engine.generate([prompt] * 4, params):
        value = json.loads(done.text)
        assert done.text == json.dumps(value, ensure_ascii=False), done.text
    own = {**SCHEMA, "x-guidance": {"whitespace_flexible": True}}
    mine = Constraint("json_schema", json.dumps(own), prefix='{\n\n  "city"')
    engine.add_request(prompt, SamplingParams(max_tokens=8, constraint=mine))  # accepted
