"""Typed attribute values read off the syntax tree, each bad one a diagnostic at its
position: the integers, booleans, durations, factors, amounts and choices the builder
types (`delivery.lang.builder`), and where a character of a value is in the file (which
the validator's messages point at too).
"""

from __future__ import annotations

import re

from delivery.errors import DeclarationError
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Attribute, parse_duration
from delivery.lang.syntax import Value

_FLOAT = re.compile(r"-?[0-9]*\.[0-9]+\Z")


def value_position(value: Value, offset: int) -> tuple[int, int]:
    """Line and column of character `offset` of a value's unescaped text."""
    if not value.quoted:
        return value.line, value.column + offset
    line, column = value.line, value.column + 1
    raw = value.raw[1:-1]
    if "\\" not in raw and "\n" not in raw:  # one character of text per character written
        return line, column + min(offset, len(raw))
    i = 0
    produced = 0
    while i < len(raw) and produced < offset:
        step = 2 if raw[i] == "\\" and i + 1 < len(raw) else 1
        if raw[i] == "\n" or (step == 2 and raw[i + 1] == "\n"):
            line += 1
            column = 1
        else:
            column += step
        produced += 0 if (step == 2 and raw[i + 1] == "\n") else 1
        i += step
    return line, column


class AttributeReader:
    """Reads typed values of one file's attributes, collecting what is wrong with them."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.diagnostics: list[Diagnostic] = []

    def diag(self, rule: str, message: str, line: int, column: int, *, node: str | None = None,
             edge: str | None = None, fix: str = "", severity: str = "error") -> None:
        self.diagnostics.append(
            Diagnostic(rule, "error" if severity == "error" else "warning", message, self.file,
                       line, column, node, edge, fix)
        )

    def declaration_error(self, err: DeclarationError, attr: Attribute, node: str | None) -> None:
        line, column = value_position(attr.value, err.offset)
        self.diag(f"{err.attribute}_syntax" if err.attribute in ("defaults", "probe") else
                  f"{err.attribute}_declaration", err.problem, line, column, node=node, fix=err.fix)

    def value_error(self, attr: Attribute, problem: str, fix: str, *, node: str | None = None,
                    edge: str | None = None) -> None:
        rule = "fidelity_valid" if "fidelity" in attr.name else "attribute_value"
        self.diag(rule, problem, attr.value.line, attr.value.column, node=node, edge=edge,
                  fix=fix)

    def int_value(self, attr: Attribute, minimum: int | None, *, node: str | None = None,
                  edge: str | None = None) -> int | None:
        name, text = attr.name, attr.text
        try:
            number = int(text)
        except ValueError:
            what = "a whole number" if _FLOAT.match(text) else "an integer"
            self.value_error(attr, f"{name}={text!r} is not {what}", f"write {name}="
                             f"{max(minimum or 0, 1) if name != 'weight' else 2}",
                             node=node, edge=edge)
            return None
        if minimum is not None and number < minimum:
            self.value_error(attr, f"{name}={number} must be {minimum} or more",
                             f"write {name}={minimum} or more", node=node, edge=edge)
            return None
        return number

    def bool_value(self, attr: Attribute, *, node: str | None = None,
                   edge: str | None = None) -> bool | None:
        if attr.text in ("true", "false"):
            return attr.text == "true"
        self.value_error(attr, f"{attr.name}={attr.text!r} is not true or false",
                         f"write {attr.name}=true", node=node, edge=edge)
        return None

    def duration_value(self, attr: Attribute, *, node: str | None = None) -> float | None:
        seconds = parse_duration(attr.text)
        if seconds is None:
            self.value_error(attr, f"{attr.name}={attr.text!r} is not a duration",
                             "write 250ms, 30s, 15m, 2h or 1d", node=node)
        return seconds

    def factor_value(self, attr: Attribute, *, node: str | None = None) -> float:
        try:
            factor = float(attr.text)
        except ValueError:
            factor = 0.0
        if factor >= 1.0:
            return factor
        self.value_error(attr, f"{attr.name}={attr.text!r} is not a number of 1 or more",
                         f"write {attr.name}=2 (or 1 for a fixed interval)", node=node)
        return 1.0

    def money_value(self, attr: Attribute) -> float | None:
        """A positive amount of US dollars (`budget_usd=25`, `budget_usd=2.50`)."""
        text = attr.text.removeprefix("$")
        try:
            amount = float(text)
        except ValueError:
            amount = -1.0
        if amount > 0 and amount != float("inf"):
            return amount
        self.value_error(attr, f"{attr.name}={attr.text!r} is not a positive amount of "
                         "dollars", f"write {attr.name}=25 (or 2.50)")
        return None

    def choice_value(self, attr: Attribute, allowed: tuple[str, ...], *,
                     node: str | None = None) -> str | None:
        if attr.text in allowed:
            return attr.text
        self.value_error(attr, f"{attr.name}={attr.text!r} is not one of {', '.join(allowed)}",
                         f"write {attr.name}={allowed[0]}", node=node)
        return None
