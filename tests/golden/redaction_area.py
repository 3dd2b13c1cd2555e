"""The redactor over a fixed corpus: what `Redactor(SECRETS).text` and `mask_token_shapes`
make of each text, what `clean_text` makes of texts with NUL and lone surrogates, and where
each labelled pattern (`Bearer`, `Authorization:`...) keeps its label and masks its value.

The corpus, generated from pieces that start, end or nearly make every pattern, glued in
any order (the pools of the property tests that held the redactor to its earlier version):
short texts; long ones repeated past the short-text limit and past the count that takes
the dense path; texts dense with whole credentials of every shape and their overlaps; a
Slack token running into a GitHub one among many GitHub prefixes (sparse and dense paths
give different results there, on purpose); label texts. A long text's output is given as
its lines, each with how many times it comes in a row."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from delivery.redact import Redactor, clean_text, mask_token_shapes
from delivery.token_shapes import _KEPT

AREA = "redaction"
SECRETS = ["hunter2-secret", "multi\n  line-secret-value \n}", "  padded-secret  ",
           "secret-value-1-x", "secret-value-22-xx"]
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
FRAGMENTS = [
    "ghp_", "gho_", "ghs_", "xghp_", "_ghp_", "github_pat_", "sk-", "-sk-", "xoxb-", "xox",
    "AKIA", "ASIA", "KIA", "://", "https://", "user:", "pw@", "@", ":", "Bearer ", "bearer\t",
    "BEARER ", "Authorization: ", "authorization=", "AUTHORIZATION:", '"', "'", "\n", "\r",
    " ", "1", "=", "***", "hunter2-secret", "line-secret-value", "secret-value-",
    "padded-secret", "é", "\x00"]
_GHP = "ghp_" + "aB3" * 12
WHOLE = [
    _GHP, "gho_" + "z9" * 18, "github_pat_" + "A_1" * 8, "sk-" + "k-9" * 8, "sk-proj-" + "x" * 20,
    "xoxb-" + "1-a" * 4, "AKIA" + "Q7" * 8, "ASIA" + "Q7" * 8 + "x", "Bearer " + "t0k.n" * 3,
    "bearer\n" + "T" * 24 + "==", "BEARER abc", "Authorization: token abc", '"authorization": "x"',
    "AUTHORIZATION=a b", "https://user:pw1@host/x", "http://u:p:q@h", "://:@", "x://a:b@c@d",
    "xoxb-aaaaaaaaaa-" + _GHP, "sk-" + "a" * 20 + "-" + _GHP, "-AKIA" + "B" * 16,
    "-xoxp-" + "9" * 10, "sk-" + "b" * 20 + "-github_pat_" + "c" * 20, "https://u:" + _GHP + "@h",
    "Bearer " + _GHP, "Authorization: Bearer " + _GHP, "hunter2-secret", "secret-value-1-x",
    "ghp_" + "a" * 35]
LABEL_PIECES = ["Bearer", "bearer", "BEARER", " ", "\t", "\n", "xBearer ", "Authorization: ",
                "1"]
GITHUB_SHAPES = [(200, 200), (256, 256), (257, 0), (0, 257), (257, 257), (100, 300), (513, 0)]


def _up_to(rng: random.Random, most: int) -> int:
    """A count up to `most`, small ones more often (short cases read better)."""
    return rng.randint(0, rng.choice([most // 6, most // 3, most]))


def _run(rng: random.Random, alphabet: str, most: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(_up_to(rng, most)))


def text(rng: random.Random) -> str:
    """A text of fragments and runs of token characters, as TEXTS of the property tests."""
    return "".join(rng.choice(FRAGMENTS) if rng.random() < 0.5 else
                   _run(rng, ALNUM + "_-./", 40) for _ in range(_up_to(rng, 30)))


def _line(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 8)):
        pool = rng.randrange(3)
        parts.append(rng.choice(WHOLE) if pool == 0 else rng.choice(FRAGMENTS) if pool == 1
                     else _run(rng, ALNUM + "_-./", 40))
    return "".join(parts)


def _label_text(rng: random.Random) -> str:
    return "".join(rng.choice(LABEL_PIECES) if rng.random() < 0.5 else
                   _run(rng, "aZ9._~+/-=", 30) for _ in range(rng.randint(0, 12)))


def _unique(rng: random.Random, make: Callable[[random.Random], Any], count: int,
            prefix: str, found: dict[str, Any]) -> None:
    seen: list[Any] = []
    while len(seen) < count:
        case = make(rng)
        if case not in seen:
            seen.append(case)
            found[f"{prefix}-{len(seen):03}"] = case


def cases() -> dict[str, Any]:
    found: dict[str, Any] = {}
    _unique(random.Random("text"), lambda r: {"text": text(r)}, 150, "text", found)
    _unique(random.Random("long"), lambda r: {
        "pieces": [text(r) for _ in range(r.randint(1, 8))], "times": r.randint(1, 400)},
        25, "long", found)
    _unique(random.Random("dense"), lambda r: {
        "lines": [_line(r) for _ in range(r.randint(1, 6))],
        "odd": [_line(r) for _ in range(r.randint(0, 4))], "times": r.randint(60, 300)},
        30, "dense", found)
    for tokens, pats in GITHUB_SHAPES:
        found[f"github-shapes-{tokens}-{pats}"] = {"ghp": tokens, "github_pat": pats}
    # ASCII texts take a path of their own
    for number, ascii_text in enumerate(["\x00", "a\x00b\n\x00", "plain\n", ""], 1):
        found[f"clean-ascii-{number}"] = {"clean": ascii_text}
    _unique(random.Random("clean"), lambda r: {"clean": "".join(
        r.choice(["a", "é", "\x00", "\ud800", "\udfff", "😀", "\n"])
        for _ in range(r.randint(0, 30)))}, 60, "clean", found)
    _unique(random.Random("label"), lambda r: {"labels": _label_text(r)}, 80, "label", found)
    return found


def source(case: dict[str, Any]) -> str:
    """The text a masking case masks."""
    if "text" in case:
        return str(case["text"])
    if "pieces" in case:
        return "\n".join(case["pieces"]) * int(case["times"])
    if "lines" in case:
        return "\n".join(case["lines"] * int(case["times"]) + case["odd"])
    overlap = "xoxb-aaaaaaaaaa-" + _GHP
    return "\n".join([overlap] + ["ghp_x"] * case["ghp"] + ["github_pat_x"] * case["github_pat"]
                     + [overlap])


def runs(masked: str, longest: int = 16) -> list[list[Any]]:
    """A long text as [lines, times in a row] blocks: at each line, the block of up to
    `longest` lines whose repetitions cover the most lines."""
    lines = masked.split("\n")
    blocks: list[list[Any]] = []
    i = 0
    while i < len(lines):
        size, times = 1, 1
        for p in range(1, min(longest, len(lines) - i) + 1):
            block, n = lines[i:i + p], 1
            while lines[i + n * p:i + (n + 1) * p] == block:
                n += 1
            if n > 1 and n * p > size * times:
                size, times = p, n
        if times == 1 and blocks and blocks[-1][1] == 1:
            blocks[-1][0].append(lines[i])
        else:
            blocks.append([lines[i:i + size], times])
        i += size * times
    assert "\n".join(line for block, n in blocks for _ in range(n) for line in block) \
        == masked
    return blocks


def output(case: dict[str, Any]) -> Any:
    if "clean" in case:
        return {"cleaned": clean_text(case["clean"])}
    if "labels" in case:
        return {"spans": [[[m.start(), m.end(1), m.end()] for m in pattern.finditer(
            case["labels"])] for _, pattern in _KEPT]}
    masking = source(case)
    masked, shapes = Redactor(SECRETS).text(masking), mask_token_shapes(masking)
    if "text" in case:
        return {"masked": masked, "shapes": shapes}
    return {"masked": runs(masked), "shapes": runs(shapes)}
