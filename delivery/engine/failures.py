"""`failure_class` and `failure_signature`: the Attractor engine keys written with every
failed stage (SPEC §3), so that a pipeline can route on the kind of failure.

The classes are the ones Attractor engines write (Kilroy's engine, whose pipelines route on
them): `transient_infra` (a timeout, a rate limit, a connection that dropped, a 5xx: running
again may help), `budget_exhausted` (retries or a run cap spent), `canceled` (the stage was
stopped from outside) and `deterministic` (everything else: running it again unchanged
fails the same way). The signature identifies "the same failure again" across attempts and
loop iterations: a short hash of the class and the reason with digits and whitespace
normalised, so `3 tests fail` and `4 tests fail` of one stage match, and a loop that keeps
failing the same way can be recognised by a condition on `failure_signature`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

TRANSIENT_INFRA: Final = "transient_infra"
DETERMINISTIC: Final = "deterministic"
BUDGET_EXHAUSTED: Final = "budget_exhausted"
CANCELED: Final = "canceled"
FAILURE_CLASSES: Final = (TRANSIENT_INFRA, DETERMINISTIC, BUDGET_EXHAUSTED, CANCELED)

# Spelled as the reasons delivery's handlers, agent CLIs and HTTP clients give them.
_TRANSIENT = re.compile(
    r"timed out|timeout|temporar|connection (?:reset|refused|aborted|closed)|"
    r"too many requests|rate.?limit|\b(?:429|502|503|504)\b|service unavailable|"
    r"econnreset|econnrefused|try again|network (?:is )?unreachable|network error",
    re.IGNORECASE)
_BUDGET = re.compile(r"max retries|retries \(\d+\) exceeded|max(?:imum)? cycles|"
                     r"the cap on|exceeded \d+ steps|budget", re.IGNORECASE)
_CANCELED = re.compile(r"\bcancel+ed\b|interrupted|stopped by", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def failure_class(reason: str) -> str:
    """The class of a failure with this reason (see the module doc)."""
    if _CANCELED.search(reason):
        return CANCELED
    if _BUDGET.search(reason):
        return BUDGET_EXHAUSTED
    if _TRANSIENT.search(reason):
        return TRANSIENT_INFRA
    return DETERMINISTIC


def failure_signature(node_id: str, klass: str, reason: str) -> str:
    """24 hex digits naming this kind of failure of this stage."""
    normal = _SPACE.sub(" ", _DIGITS.sub("N", reason.strip().lower()))
    digest = hashlib.sha256(f"{node_id}|{klass}|{normal}".encode()).hexdigest()
    return digest[:24]
