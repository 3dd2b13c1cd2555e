"""GitHub Actions expressions (`${{ … }}`), as much of them as workflow files use:

    literals 'text' (quote doubled inside), numbers, true, false, null
    contexts  github.event.issue.number, steps.app-token.outputs.token, secrets.X, vars.X,
              inputs.x, env.X; properties by `.name` or `['name']`
    operators ( ) ! == != < <= > >= && ||   (string comparison ignores case, as GitHub's)
    functions contains, startsWith, endsWith, format, join, toJSON, fromJSON,
              always, success, failure, cancelled

Values follow GitHub's rules: null, false, 0, '' and NaN are falsy; `&&` and `||` give one
of their operands; a missing property is null. An expression that cannot be parsed is an
ExpressionError naming it (a workflow file of the world is wrong, not the code under test).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_TOKEN = re.compile(r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
)""", re.VERBOSE)
_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


class ExpressionError(ValueError):
    pass


def truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def to_text(value: Any) -> str:
    """How a value is written into a string (`run:`, `with:`): null as '', booleans in
    lower case, objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def substitute(text: str, contexts: Mapping[str, Any]) -> str:
    """`text` with each `${{ expr }}` replaced by its value."""
    return _TEMPLATE.sub(lambda match: to_text(evaluate(match.group(1), contexts)), text)


def evaluate_if(condition: Any, contexts: Mapping[str, Any]) -> bool:
    """A job's or step's `if:`: with or without `${{ }}`; absent means true."""
    if condition is None:
        return True
    if isinstance(condition, bool):
        return condition
    text = str(condition).strip()
    whole = _TEMPLATE.fullmatch(text)
    return truthy(evaluate(whole.group(1) if whole else text, contexts))


def evaluate(expression: str, contexts: Mapping[str, Any]) -> Any:
    tokens = _tokens(expression)
    parser = _Parser(tokens, contexts, expression)
    value = parser.either()
    if parser.position != len(tokens):
        raise ExpressionError(f"expression {expression.strip()!r}: unexpected "
                              f"{tokens[parser.position][1]!r}")
    return value


def _tokens(expression: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ExpressionError(f"expression {expression.strip()!r}: cannot read "
                                  f"{text[position:position + 10]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _equal(left: Any, right: Any) -> bool:
    """GitHub's loose equality: strings ignore case; values of different types are
    compared as numbers (null and '' are 0, so `null == ''`)."""
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    if type(left) is type(right):
        return bool(left == right)
    return _number(left) == _number(right)


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return math.nan
    return math.nan


def _format(template: str, *args: Any) -> str:
    return re.sub(r"\{(\d+)\}", lambda m: to_text(args[int(m.group(1))]), template)


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "contains": lambda haystack, needle: (
        any(_equal(item, needle) for item in haystack) if isinstance(haystack, list)
        else to_text(needle).lower() in to_text(haystack).lower()),
    "startswith": lambda text, prefix: to_text(text).lower().startswith(
        to_text(prefix).lower()),
    "endswith": lambda text, suffix: to_text(text).lower().endswith(to_text(suffix).lower()),
    "format": _format,
    "join": lambda items, sep=",": to_text(sep).join(to_text(item) for item in items or []),
    "tojson": lambda value: json.dumps(value, indent=2),
    "fromjson": lambda text: json.loads(text),
    "always": lambda: True,
    "success": lambda: True,  # the world stops a job at its first failing step
    "failure": lambda: False,
    "cancelled": lambda: False,
}


STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")
_HAS_STATUS = re.compile(r"\b(?:always|success|failure|cancelled)\s*\(", re.IGNORECASE)


def checks_status(condition: Any) -> bool:
    """Whether an `if:` calls a status function; one that does not is `success() && …`
    for GitHub (a job whose needed job failed or was skipped is skipped)."""
    return bool(_HAS_STATUS.search(str(condition or "")))


def _status(name: str, job: Any) -> bool:
    """A status function, from the `job` context's `status` (success, failure): a step's
    `if:` sees its job's (the world stops a job at its first failing step), a job's the
    jobs it needs."""
    status = job.get("status") if isinstance(job, dict) else None
    failed = status == "failure"
    return {"always": True, "success": not failed, "failure": failed,
            "cancelled": False}[name]


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], contexts: Mapping[str, Any],
                 source: str) -> None:
        self.tokens = tokens
        self.contexts = contexts
        self.source = source
        self.position = 0

    def _peek(self) -> str:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else ""

    def _take(self, wanted: str | None = None) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise ExpressionError(f"expression {self.source.strip()!r} ends too early")
        token = self.tokens[self.position]
        if wanted is not None and token[1] != wanted:
            raise ExpressionError(f"expression {self.source.strip()!r}: expected {wanted!r}, "
                                  f"found {token[1]!r}")
        self.position += 1
        return token

    def either(self) -> Any:
        value = self.both()
        while self._peek() == "||":
            self._take()
            right = self.both()
            value = value if truthy(value) else right
        return value

    def both(self) -> Any:
        value = self.compare()
        while self._peek() == "&&":
            self._take()
            right = self.compare()
            value = right if truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self._peek() in ("==", "!=", "<", "<=", ">", ">="):
            op = self._take()[1]
            right = self.unary()
            if op in ("==", "!="):
                value = _equal(value, right) == (op == "==")
            else:
                value = {"<": value < right, "<=": value <= right, ">": value > right,
                         ">=": value >= right}[op]
        return value

    def unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self.unary())
        return self.postfix(self.primary())

    def primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            value = self.either()
            self._take(")")
            return value
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return float(text) if "." in text else int(text)
        if kind != "name":
            raise ExpressionError(f"expression {self.source.strip()!r}: unexpected {text!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            return self.call(text)
        return self.contexts.get(text)

    def call(self, name: str) -> Any:
        function = FUNCTIONS.get(name.lower())
        if function is None:
            raise ExpressionError(f"expression {self.source.strip()!r}: no function {name}")
        self._take("(")
        args = []
        while self._peek() != ")":
            args.append(self.either())
            if self._peek() == ",":
                self._take()
        self._take(")")
        if name.lower() in STATUS_FUNCTIONS and not args:
            # a job's `if:`: whether the jobs it needs succeeded (`job.status` below)
            return _status(name.lower(), self.contexts.get("job"))
        return function(*args)

    def postfix(self, value: Any) -> Any:
        while self._peek() in (".", "["):
            if self._take()[1] == ".":
                key: Any = self._take()[1]
            else:
                key = self.either()
                self._take("]")
            value = _property(value, key)
        return value


def _property(value: Any, key: Any) -> Any:
    if isinstance(value, Mapping):
        if key in value:
            return value[key]
        # context property names ignore case, as GitHub's do
        lowered = {str(k).lower(): v for k, v in value.items()}
        return lowered.get(str(key).lower())
    if isinstance(value, list) and isinstance(key, (int, float)) and 0 <= key < len(value):
        return value[int(key)]
    return None
