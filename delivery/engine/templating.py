"""Prompt and script templates (SPEC §4): sandboxed Jinja2 over the run context.

Names: `goal`, `inputs`, `context`, every context key's first segment, `current_work`,
`parallel`, `folders`. Dotted context keys are read through ContextView, a read-only
nested view of the flat map in which context keys win over dict methods. Undefined
names are errors. With shell=True every `{{ … }}` is shell-quoted as one word.

The sandbox also bounds what a template can allocate or spend: `*`, `**`, `+`, `%` and
`~` check the size of their result first, string-growing filters and str methods check
their arguments, loops check a deadline, and the output is counted as it is produced.
"""

from __future__ import annotations

import json
import re
import shlex
import string
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from functools import wraps
from typing import Any, Final

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context as JinjaContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing
from pydantic import ValidationError

from delivery.engine.context import Context, ContextView, ViewIndex, json_default, text_form
from delivery.engine.work import WORK_SCOPE, describe_work
from delivery.errors import RunError
from delivery.errors import TemplateRenderError as TemplateRenderError
from delivery.lang.paths import MISSING
from delivery.lang.template_reads import DOLLAR_GOAL

_GOAL_NAME: Final = "__dollar_goal__"
_TEMPLATE_FILE: Final = "<template>"
MAX_INT_BITS: Final = 100_000
_DIGITS = re.compile(r"\d+")
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


class _LimitExceeded(SecurityError):
    """A template tried to build something over the renderer's limits."""


class _Undefined(StrictUndefined):
    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        if self._undefined_hint:
            return self._undefined_hint
        if self._undefined_obj is missing:
            return f"'{self._undefined_name}' is not in the context"
        return str(super()._undefined_message)

    # A missing dotted key read through a missing prefix (`tests.passed` with no `tests.*`
    # key) is undefined as a whole rather than an error at the first dot, so that
    # `{{ tests.passed | default('') }}` guards the read as the validator promises.
    # Rendering, testing or iterating it still fails, naming the full key.
    def _chained(self, segment: str) -> _Undefined:
        name = self._undefined_name
        plain = self._undefined_hint is None or self._undefined_hint == _absent_hint(name)
        if self._undefined_obj is missing and isinstance(name, str) and plain:
            return _absent(f"{name}.{segment}")
        return self  # keeps its own message (an unsaved current_work, a missing $goal)

    def __getattr__(self, name: str) -> Any:
        if name[:2] == "__":
            raise AttributeError(name)
        return self._chained(name)

    def __getitem__(self, key: Any) -> Any:
        return self._chained(str(key))


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise _LimitExceeded(f"rendering took longer than {self.seconds:g} s")


_BUDGET: ContextVar[_Budget] = ContextVar("delivery_template_budget")


def _loop_budget(iterable: Iterable[Any]) -> Iterator[Any]:
    budget = _BUDGET.get()
    for item in iterable:
        budget.tick()
        yield item


def _text(value: Any) -> str:
    if isinstance(value, StrictUndefined):
        return str(value)  # raises UndefinedError naming what is missing
    return text_form(value)


def _shell_word(value: Any) -> str:
    return shlex.quote(_text(value))


# -- size accounting -------------------------------------------------------------------


def _weight(value: Any, memo: dict[int, int] | None = None) -> int:
    """Roughly how many characters `value` renders to (shared sub-objects counted each time)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, ContextView):
        return len(str(value))
    if not isinstance(value, (list, tuple, dict)):
        return 1
    memo = {} if memo is None else memo
    if id(value) not in memo:
        parts = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        memo[id(value)] = 1 + sum(_weight(part, memo) for part in parts)
    return memo[id(value)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _CodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Environment(ImmutableSandboxedEnvironment):
    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, *, max_size: int, shell: bool) -> None:
        super().__init__(undefined=_Undefined, autoescape=False, keep_trailing_newline=True,
                         finalize=_shell_word if shell else _text)
        self.max_size = max_size
        self.globals.pop("lipsum", None)
        self.policies["json.dumps_function"] = self._dumps
        self.filters["delivery_loop_budget"] = _loop_budget
        for name in ("center", "batch", "slice", "wordwrap", "truncate", "tojson"):
            self.filters[name] = self._guard(self.filters[name], self._check_int_args)
        self.filters["indent"] = self._guard(self.filters["indent"], self._check_indent)
        self.filters["replace"] = self._guard(self.filters["replace"], self._check_replace)
        self.filters["format"] = self._guard(self.filters["format"], self._check_printf)
        self.filters["join"] = self._guard(self.filters["join"], self._check_join)

    @staticmethod
    def _dumps(value: Any, **kwargs: Any) -> str:
        return json.dumps(value, default=json_default, **kwargs)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "delivery_loop_budget", [], [], None, None,
                                     lineno=loop.lineno)
        return tree

    # -- limits --------------------------------------------------------------------

    def _bound(self, size: int, what: str) -> None:
        if size > self.max_size:
            raise _LimitExceeded(f"{what} would be {size} characters or items, over the "
                                 f"limit of {self.max_size}")

    def call_binop(self, context: JinjaContext, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            if _is_int(left) and _is_int(right):
                self._bound_int(left.bit_length() + right.bit_length())
            elif _is_int(right) or _is_int(left):
                seq, times = (left, right) if _is_int(right) else (right, left)
                if isinstance(seq, (str, list, tuple)):
                    self._bound(_weight(seq) * max(times, 0), "the result of '*'")
        elif operator == "**" and _is_int(left) and _is_int(right) and abs(left) > 1:
            self._bound_int(left.bit_length() * max(right, 0))
        elif operator == "+" and isinstance(left, (str, list, tuple)):
            self._bound(_weight(left) + _weight(right), "the result of '+'")
        elif operator == "%" and isinstance(left, str):
            self._check_printf(left)
        return self.binop_table[operator](left, right)

    def _bound_int(self, bits: int) -> None:
        if bits > MAX_INT_BITS:
            raise _LimitExceeded(f"a number of about {bits} bits is over the limit of "
                                 f"{MAX_INT_BITS}")

    def bounded_concat(self, parts: Sequence[Any]) -> str:
        pieces = [_text(part) for part in parts]
        self._bound(sum(map(len, pieces)), "the result of '~'")
        return "".join(pieces)

    def call(__self, __context: JinjaContext, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        target = getattr(__obj, "__self__", None)
        if isinstance(__obj, types.BuiltinMethodType) and isinstance(target, str):
            args = __self._check_str_method(target, __obj.__name__, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def _check_str_method(self, text: str, name: str, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> tuple[Any, ...]:
        what = f"str.{name}()"
        if name in ("center", "ljust", "rjust", "zfill"):
            self._check_int_args(text, *args, **kwargs)
        elif name == "expandtabs" and args and _is_int(args[0]):
            self._bound(len(text) * max(args[0], 1), what)
        elif name == "replace" and len(args) >= 2:
            self._check_replace(text, *args)
        elif name == "join" and args:
            items = list(args[0])
            self._bound(len(text) * len(items) + _weight(items), what)
            return (items, *args[1:])
        return args

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            for _, _, spec, _ in string.Formatter().parse(value.__self__):
                if spec and "{" in spec:
                    raise _LimitExceeded("nested format specifications are not allowed")
                for digits in _DIGITS.findall(spec or ""):
                    self._bound(int(digits), "a format width")
        return wrapped

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, ContextView):
            return obj.attribute(attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, ContextView):
            if isinstance(argument, str) or _is_int(argument):
                return obj.member(str(argument))
            if isinstance(argument, slice):
                return list(obj)[argument]
        return super().getitem(obj, argument)

    # -- filter guards -------------------------------------------------------------

    @staticmethod
    def _guard(function: Callable[..., Any], check: Callable[..., Any]) -> Callable[..., Any]:
        offset = 1 if hasattr(function, "jinja_pass_arg") else 0

        @wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            replaced = check(*args[offset:], **kwargs)
            if replaced is not None:
                args = (*args[:offset], replaced, *args[offset + 1 :])
            return function(*args, **kwargs)

        return guarded

    def _check_int_args(self, _value: Any, *args: Any, **kwargs: Any) -> None:
        for arg in (*args, *kwargs.values()):
            if _is_int(arg):
                self._bound(abs(arg), "a width or count argument")

    def _check_indent(self, value: Any, width: Any = 4, *_: Any, **__: Any) -> None:
        per_line = abs(width) if _is_int(width) else len(str(width))
        text = str(value)
        self._bound(len(text) + (text.count("\n") + 1) * per_line, "the result of indent")

    def _check_replace(self, value: Any, old: Any, new: Any, count: Any = None,
                       *_: Any) -> None:
        text, old, new = str(value), str(old), str(new)
        hits = text.count(old) if old else len(text) + 1
        if _is_int(count) and count >= 0:
            hits = min(hits, count)
        self._bound(len(text) + hits * max(len(new) - len(old), 0), "the result of replace")

    def _check_printf(self, value: Any, *_: Any, **__: Any) -> None:
        for width, precision in _PRINTF.findall(str(value)):
            for number in (width, precision):
                if number == "*":
                    raise _LimitExceeded("'*' widths in % formats are not allowed")
                if number:
                    self._bound(int(number), "a format width")

    def _check_join(self, value: Any, separator: Any = "", *_: Any, **__: Any) -> list[Any]:
        items = list(value)
        self._bound(len(str(separator)) * len(items) + _weight(items), "the result of join")
        return items


# -- the renderer ----------------------------------------------------------------------


_TEMPLATE_SYNTAX = re.compile(r"\{[{%#]|\$goal\b")


class Renderer:
    """Renders prompt and script templates against a Context; compiled sources are cached."""

    def __init__(self, *, max_template_chars: int = 100_000, max_output_chars: int = 1_000_000,
                 max_render_seconds: float = 10.0) -> None:
        self.max_template_chars = max_template_chars
        self.max_output_chars = max_output_chars
        self.max_render_seconds = max_render_seconds
        self._environments = {shell: _environment(max_output_chars, shell)
                              for shell in (False, True)}

    def render(self, source: str, context: Context, *, folders: Sequence[str] = (),
               shell: bool = False, plain: bool = False) -> str:
        """The rendered template. `plain` (SPEC §4, `template=plain`): the text as written,
        `{{ … }}` included, with only `$goal` expanded in a prompt (a script is kept whole:
        `$goal` there is the shell's)."""
        if plain:
            if shell or not DOLLAR_GOAL.search(source):
                return source
            goal = context.lookup("goal")
            return DOLLAR_GOAL.sub(lambda _: "" if goal is MISSING else text_form(goal), source)
        if len(source) > self.max_template_chars:
            raise TemplateRenderError(f"the template is {len(source)} characters long, over "
                                      f"the limit of {self.max_template_chars}")
        if not _TEMPLATE_SYNTAX.search(source):
            return source  # plain text renders as itself; compiling it costs ~1 ms
        template = self._compile(source, shell)
        token = _BUDGET.set(_Budget(self.max_render_seconds))
        try:
            variables = _variables(context, folders, uses_goal=DOLLAR_GOAL.search(source))
            budget, pieces, size = _BUDGET.get(), [], 0
            for piece in template.generate(variables):
                size += len(piece)
                if size > self.max_output_chars:
                    raise _LimitExceeded(f"the output is over the limit of "
                                         f"{self.max_output_chars} characters")
                budget.tick()
                pieces.append(piece)
            return "".join(pieces)
        except RunError:
            raise
        except Exception as err:
            raise _render_error(err) from None
        finally:
            _BUDGET.reset(token)

    def _compile(self, source: str, shell: bool) -> Any:
        cache_key = (self.max_output_chars, shell, source)
        compiled = _COMPILED.get(cache_key)
        if compiled is None:
            expanded = DOLLAR_GOAL.sub("{{ " + _GOAL_NAME + " }}", source)
            try:
                compiled = self._environments[shell].from_string(expanded)
            except TemplateSyntaxError as err:
                raise TemplateRenderError(f"syntax error: {err.message}", err.lineno) from None
            except RecursionError:
                raise TemplateRenderError("the template is nested too deeply") from None
            if len(_COMPILED) >= 1024:
                _COMPILED.clear()
            _COMPILED[cache_key] = compiled
        return compiled


# Compiling a template costs ~10 ms; a process that runs many workflows (`delivery test`, a
# library user) compiles each source once. A compiled template holds no render state — the
# variables and the time budget are passed to each render — so runs can share it, as long as
# it comes from an environment with the same limits.
_ENVIRONMENTS: dict[tuple[int, bool], _Environment] = {}
_COMPILED: dict[tuple[int, bool, str], Any] = {}


def _environment(max_size: int, shell: bool) -> _Environment:
    key = (max_size, shell)
    if key not in _ENVIRONMENTS:
        _ENVIRONMENTS[key] = _Environment(max_size=max_size, shell=shell)
    return _ENVIRONMENTS[key]


def _variables(context: Context, folders: Sequence[str], uses_goal: object) -> dict[str, Any]:
    index = ViewIndex(context, _absent)
    variables = {name: index.entry(name) for name in index.children.get("", {})}
    for name in ("inputs", "parallel"):
        if not isinstance(variables.get(name), ContextView):
            variables[name] = index.namespace(name)
    variables["context"] = index.root()
    variables["current_work"] = _current_work(context)
    variables["folders"] = list(folders)
    if uses_goal:
        goal = context.lookup("goal")
        variables[_GOAL_NAME] = (
            _Undefined(hint="$goal is used but the context has no 'goal'", name="goal")
            if goal is MISSING else goal
        )
    return variables


def _absent_hint(key: object) -> str:
    return f"'{key}' is not in the context"


def _absent(key: str) -> _Undefined:
    return _Undefined(hint=_absent_hint(key), name=key)


def _current_work(context: Context) -> Any:
    saved = context.lookup("current_work")
    if saved is MISSING or saved is None or saved == "":
        return _Undefined(hint="no work scope was saved in this run: 'current_work' is unset "
                               "(a stage with a work output must run first)",
                          name="current_work")
    try:
        if isinstance(saved, str):
            scope = WORK_SCOPE.validate_json(saved)
        else:
            scope = WORK_SCOPE.validate_python(saved)
    except ValidationError as err:
        problems = "; ".join(e["msg"] for e in err.errors())
        return _Undefined(hint=f"'current_work' is not a valid work scope: {problems}",
                          name="current_work")
    return describe_work(scope)


def _render_error(err: Exception) -> TemplateRenderError:
    line = None
    trace = err.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
            line = trace.tb_lineno
        trace = trace.tb_next
    if isinstance(err, _LimitExceeded):
        problem = f"limit exceeded: {err}"
    elif isinstance(err, SecurityError):
        problem = f"blocked by the sandbox: {err}"
    elif isinstance(err, OverflowError) and "MAX_RANGE" in str(err):
        problem = f"limit exceeded: {err}"
    elif type(err).__name__ == "UndefinedError":
        problem = str(err)
    else:
        problem = f"{type(err).__name__}: {err}"
    return TemplateRenderError(problem, line)
