"""What one template render may cost: steps, wall time, the size of each text or list it makes
and of everything it makes, and how deep its calls nest.

Jinja's sandbox stops attribute escapes and mutation, not work: `'a' * 10**10`, loops over
range(99999) inside each other, a macro calling itself. Here every loop turn, call, filter,
`~` and arithmetic operator passes a guard; a limit passed is a SecurityError raised at the
template's line. No pipeline knowledge here.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jinja2 import Template, nodes, pass_environment, pass_eval_context
from jinja2 import filters as jinja_filters
from jinja2.compiler import CodeGenerator, Frame
from jinja2.environment import Environment
from jinja2.exceptions import SecurityError
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, LoopContext, Macro
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.utils import generate_lorem_ipsum
from markupsafe import Markup

MAX_SIZE = 8_000_000  # characters of a text (items of a list) a template makes or outputs
MAX_WORK = 64_000_000  # characters made in all by one render, its output included
MAX_STEPS = 100_000  # loop turns, calls, filters and operators in one render
MAX_SECONDS = 10.0  # wall time of one render
MAX_NESTING = 60  # calls inside calls (macros, recursive loops), far below Python's limit
MAX_RANGE = 100_000  # numbers in one range()
MAX_INT_BITS = 100_000  # an integer `*` or `**` makes (30,000 digits)
_UNBOUNDED = frozenset({"encode", "expandtabs", "maketrans", "translate"})  # str methods
_PADDING = frozenset({"center", "ljust", "rjust", "zfill"})
_SIZED = (str, bytes, list, tuple)
_TEXT_FILTERS = frozenset(  # filters that make the text of their value first
    {
        "capitalize", "center", "e", "escape", "forceescape", "format", "headline", "indent",
        "last_words", "lower", "pprint", "replace", "safe", "script", "slug", "string",
        "striptags", "title", "tojson", "trim", "truncate", "upper", "urlencode", "urlize",
        "wordcount", "words", "wordwrap", "xmlattr",
    }
)  # fmt: skip
_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
T = TypeVar("T")


@dataclass(slots=True)
class _Budget:
    steps: int = 0
    chars: int = 0
    nesting: int = 0
    deadline: float = field(default_factory=lambda: time.monotonic() + MAX_SECONDS)

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise SecurityError(
                f"the template takes more than {MAX_STEPS:,} steps (loop turns, calls, filters)"
            )
        if time.monotonic() > self.deadline:
            raise SecurityError(f"the template ran for more than {MAX_SECONDS:g} s")


# the render in progress; None while a template compiles (Jinja folds constant filters then)
_budget: ContextVar[_Budget | None] = ContextVar("gen_template_budget", default=None)


def _step() -> None:
    budget = _budget.get()
    if budget is not None:
        budget.step()


def _refuse(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise SecurityError(f"{what} would be {size:,} long or more; the limit is {MAX_SIZE:,}")


def made(value: T) -> T:
    """A text or list a template made: at most MAX_SIZE long, counted toward MAX_WORK."""
    if isinstance(value, _SIZED):
        _refuse(len(value), "a text" if isinstance(value, str | bytes) else "a list")
        budget = _budget.get()
        if budget is not None:
            budget.chars += len(value)
            if budget.chars > MAX_WORK:
                raise SecurityError(f"the template makes more than {MAX_WORK:,} characters")
    return value


_END = object()


def text_size(value: Any) -> int:
    """About how long str(value) is, counted before it is made: a list of a thousand
    references to one long text is short, its text is not. Stops counting past MAX_SIZE."""
    if isinstance(value, str):
        return len(value)
    size, stack = 0, [iter((value,))]
    while stack and size <= MAX_SIZE:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, str | bytes):
            size += len(item) + 4  # quotes and a separator
        elif isinstance(item, dict):
            size += 2
            stack.append(iter([x for pair in item.items() for x in pair]))
        elif isinstance(item, list | tuple | set | frozenset):
            size += 2
            stack.append(iter(item))
        else:
            size += len(str(item)) + 2
    return size


def _measured(value: T) -> T:
    """`value`, refused when its text would be too long (a container's, before it is made)."""
    if not isinstance(value, str) and isinstance(value, list | tuple | set | frozenset | dict):
        _refuse(text_size(value), "a text")
    return value


def _width(digits: str) -> int:
    return int(digits) if len(digits) < 12 else MAX_SIZE + 1


def _check_percent(fmt: str) -> None:
    """`'%09999999d' % x` pads before anything could be measured: refuse wide fields."""
    for width, precision in _PERCENT.findall(fmt):
        if "*" in (width, precision):
            raise SecurityError("a '*' width in %-formatting is not allowed in templates")
        for digits in (width, precision):
            _refuse(_width(digits) if digits else 0, "a formatted field")


class _FieldLimit(SandboxedFormatter):
    def format_field(self, value: Any, format_spec: str) -> Any:
        for digits in re.findall(r"\d+", format_spec):  # width, precision (fill: one char)
            _refuse(_width(digits), "a formatted field")
        return made(super().format_field(_measured(value), format_spec))


class _EscapeFieldLimit(_FieldLimit, SandboxedEscapeFormatter):
    pass


class _LimitedCode(CodeGenerator):
    """Compiles every `for` to iterate through `environment.loop_items`, every `~` to join
    through `environment.joined`."""

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        items = nodes.Call(nodes.EnvironmentAttribute("loop_items"), [node.iter], [], None, None)
        guarded = nodes.For(node.target, items, node.body, node.else_, node.test, node.recursive)
        guarded.set_lineno(node.lineno)
        super().visit_For(guarded, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:  # as Jinja chooses: escaping inside {% autoescape %}
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        else:
            join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
        self.write(f"environment.joined({join}, (")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")


class _LimitedTemplate(Template):
    def render(self, *args: Any, **kwargs: Any) -> str:
        token = _budget.set(_Budget())  # each render has the whole budget
        try:
            return super().render(*args, **kwargs)
        finally:
            _budget.reset(token)


def loop_items(items: Iterable[T]) -> Iterator[T]:
    for item in items:
        _step()
        yield item


class LimitedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's sandbox (no private attributes, no changing lists and dicts in place) with a
    cost limit on every render; make_environment adds the filters and globals below."""

    code_generator_class = _LimitedCode
    template_class = _LimitedTemplate
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    loop_items = staticmethod(loop_items)
    made = staticmethod(made)

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_measured, **options)  # every {{ }} before str()

    @staticmethod
    def joined(join: Callable[[Iterable[Any]], str], parts: Iterable[Any]) -> str:
        """`a ~ b ~ c`: the parts measured one by one before they are joined."""
        size = 0
        for part in (parts := list(parts)):
            size += text_size(part)
            _refuse(size, "a text")
        return made(join(parts))

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """The output of a template, block or macro, measured while it is written."""
        out, size = [], 0
        for part in parts:
            size += len(part)
            _refuse(size, "the output")
            out.append(part)
        return made("".join(out))

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, str | bytes) and attr in _UNBOUNDED:
            return False
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _step()
        ints = isinstance(left, int) and isinstance(right, int)
        if operator == "**" and ints and right > 0 and abs(left) > 1:
            if right * abs(left).bit_length() > MAX_INT_BITS:
                raise SecurityError(f"{left} ** {right} has more than {MAX_INT_BITS:,} bits")
        elif operator == "*" and ints:
            if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise SecurityError(f"a product of more than {MAX_INT_BITS:,} bits")
        elif operator == "*":
            seq, times = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int):
                _refuse(len(seq) * times, "a repeated text or list")
        elif operator == "+" and isinstance(left, str | list | tuple):
            if isinstance(right, str | list | tuple):
                _refuse(len(left) + len(right), "a joined text or list")
        elif operator == "%" and isinstance(left, str):
            _check_percent(left)
            _refuse(len(left) + text_size(right), "a formatted text")
        return made(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(__obj) is not Macro:  # a macro's output is measured as it is written
            args = _checked(__obj, args)
        budget = _budget.get()
        if budget is None:
            return made(super().call(__context, __obj, *args, **kwargs))
        budget.step()
        budget.nesting += 1
        try:
            if budget.nesting > MAX_NESTING:
                message = f"calls nested more than {MAX_NESTING} deep (a macro calling itself?)"
                raise SecurityError(message)
            return made(super().call(__context, __obj, *args, **kwargs))
        finally:
            budget.nesting -= 1

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """str.format and format_map with a limit on each field's width."""
        if super().wrap_str_format(value) is None:
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"
        formatter: SandboxedFormatter = (
            _EscapeFieldLimit(self, escape=text.escape)
            if isinstance(text, Markup)
            else _FieldLimit(self)
        )

        def limited(*args: Any, **kwargs: Any) -> str:
            if not is_map:
                return type(text)(formatter.vformat(text, args, kwargs))
            if kwargs or len(args) != 1:
                raise TypeError("format_map() takes exactly one mapping")
            return type(text)(formatter.vformat(text, (), args[0]))

        return functools.update_wrapper(limited, value)


def _checked(obj: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The arguments of a call, refused where the call would make a text far longer than
    its inputs; a recursive loop's `loop(children)` iterates through loop_items."""
    if isinstance(obj, LoopContext) and args:
        return (loop_items(args[0]), *args[1:])
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if not isinstance(owner, str | bytes) or not args:
        return args
    if name in _PADDING and isinstance(args[0], int):
        _refuse(args[0], "a padded text")
    elif name == "replace" and len(args) >= 2:
        _refuse(_replaced(owner, *args), "a replaced text")
    elif name == "join":
        args = (_listed(args[0]),)
        _refuse(_joined(owner, args[0]), "a joined text")
    return args


def _listed(items: Any) -> Any:
    return items if hasattr(items, "__len__") else list(items)


def _replaced(text: Any, old: Any, new: Any, count: int | None = -1) -> int:
    """How long text.replace(old, new, count) would be, without making it."""
    found = text.count(old) if old else len(text) + 1
    found = found if count is None or count < 0 else min(found, count)
    return len(text) + found * (len(new) - len(old))


def _joined(separator: Any, items: Any) -> int:
    return max(len(items) - 1, 0) * len(separator)


def counted(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """The filter `name` counting as a step, its result measured (pass_* markers kept);
    a filter that makes its value's text first has that measured before."""
    value_at = 0 if getattr(f, "jinja_pass_arg", None) is None else 1  # after the context
    text_first = name in _TEXT_FILTERS

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        _step()
        if text_first and len(args) > value_at:
            _measured(args[value_at])
        return made(f(*args, **kwargs))

    return run


# -- Jinja's filters and globals that can make far more than they are given ---------------


def _center(value: str, width: int = 80) -> str:
    _refuse(width, "a centered text")
    return jinja_filters.do_center(value, width)


def _indent(s: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    pad = len(width) if isinstance(width, str) else width
    _refuse(len(str(s)) + (str(s).count("\n") + 1) * pad, "an indented text")
    return jinja_filters.do_indent(s, width, first, blank)


@pass_environment
def _wordwrap(
    env: Environment,
    s: str,
    width: int = 79,
    break_long_words: bool = True,
    wrapstring: str | None = None,
    break_on_hyphens: bool = True,
) -> str:
    wrap = wrapstring or env.newline_sequence
    _refuse(len(s) + (len(s) // max(width, 1) + 1) * len(wrap), "a wrapped text")
    return jinja_filters.do_wordwrap(env, s, width, break_long_words, wrap, break_on_hyphens)


@pass_eval_context
def _replace(ctx: EvalContext, s: str, old: str, new: str, count: int | None = None) -> str:
    _refuse(_replaced(str(s), str(old), str(new), count), "a replaced text")
    return jinja_filters.do_replace(ctx, s, old, new, count)


@pass_eval_context
def _join(ctx: EvalContext, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    if attribute is not None:
        value = map(jinja_filters.make_attrgetter(ctx.environment, attribute), value)
    items = _listed(value)
    _refuse(text_size(list(items)) + _joined(d, items), "a joined text")
    return jinja_filters.sync_do_join(ctx, items, d)


def _format(value: str, *args: Any, **kwargs: Any) -> str:
    _check_percent(str(value))
    _refuse(len(str(value)) + text_size(args) + text_size(kwargs), "a formatted text")
    return jinja_filters.do_format(value, *args, **kwargs)


@pass_environment
def _sum(env: Environment, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    """`lists | sum(start=[])` joins lists: measured before they are joined."""
    if attribute is not None:
        iterable = map(jinja_filters.make_attrgetter(env, attribute), iterable)
    items = _listed(iterable)
    if isinstance(start, _SIZED):
        _refuse(len(start) + sum(len(x) for x in items if isinstance(x, _SIZED)), "a sum")
    return sum(items, start)


def _batch(value: Iterable[T], linecount: int, fill_with: T | None = None) -> Any:
    _refuse(linecount, "a batch")
    return jinja_filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    _refuse(slices, "a slice count")
    return jinja_filters.sync_do_slice(value, slices, fill_with)


SIZED_FILTERS: dict[str, Callable[..., Any]] = {
    "center": _center,
    "indent": _indent,
    "wordwrap": _wordwrap,
    "replace": _replace,
    "join": _join,
    "format": _format,
    "batch": _batch,
    "slice": _slice,
    "sum": _sum,
}


def _range(*args: int) -> range:
    numbers = range(*args)
    try:
        size = len(numbers)
    except OverflowError:  # more than sys.maxsize numbers
        size = numbers.stop - numbers.start
    if size > MAX_RANGE:
        raise SecurityError(f"range() of {size:,} numbers; the limit is {MAX_RANGE:,}")
    return numbers


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    _refuse(n * max, "lorem ipsum")
    return generate_lorem_ipsum(n, html, min, max)


GLOBALS: dict[str, Callable[..., Any]] = {"range": _range, "lipsum": _lipsum}
