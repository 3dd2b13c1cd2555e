"""Redaction throughput (SPEC §14: a 1 MB reply costs milliseconds): MB/s on 1 MB of code,
prose and token-dense text, against the previous approach (a substring pre-check that
let any URL or `_`+`gh` through to four regular expressions, and one regex alternation of
the known values run on every text).

    .venv/bin/python benchmarks/redaction.py [--mb N] [--repeat N]

The redactor knows eight secret values, as a run's environment typically gives it.
Figures are medians of CPU time per call. The last line is a stage's `response.md`: a
transcript quoting a 1 MB reply of code that the redactor masked on receipt, checked
only around the reply, against a scan of all of it (what it cost before).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from delivery.redact import MASK, Redactor

ROOT = Path(__file__).resolve().parent.parent
SECRETS = [f"secret-value-{n}-{'x' * n}" for n in range(8)]


def code_text(size: int) -> str:
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("delivery/**/*.py")))
    return (source * (size // len(source) + 1))[:size]


def prose_text(size: int) -> str:
    rng = random.Random(1)
    words = ['the', 'run', 'reads', 'a', 'ticket', 'and', 'changes', 'code', 'in', 'several',
             'repositories', 'then', 'opens', 'one', 'pull', 'request', 'per', 'repository',
             'and', 'watches', 'them', 'until', 'every', 'one', 'is', 'merged;', 'see',
             'https://example.com/docs', 'for', 'the', 'details', 'of', 'each', 'stage']
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:size]


def token_dense_text(size: int) -> str:
    rng = random.Random(2)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

    def token() -> str:
        kind = rng.randrange(5)
        body = "".join(rng.choice(alphabet) for _ in range(36))
        return [f"ghp_{body}", f"sk-{body}", f"Bearer {body}1", f"AKIA{body[:16].upper()}",
                SECRETS[rng.randrange(len(SECRETS))]][kind]

    out: list[str] = []
    total = 0
    while total < size:
        piece = f"line {total}: token={token()} url=https://user:pw{total}@host/x\n"
        out.append(piece)
        total += len(piece)
    return "".join(out)[:size]


class PreviousRedactor:
    """The approach this replaced, kept here as the named alternative."""

    _WHOLE = re.compile(
        r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,}"
        r"|(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,}"
        r"|(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}"
        r"|(?<![A-Za-z0-9_])xox[baprs]-[A-Za-z0-9-]{10,}"
    )
    _TOKEN = r"[A-Za-z0-9._~+/-]"
    _LABELLED = (
        re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)[^\s\"'][^\r\n\"']*"),
        re.compile(rf"(?i)(\bbearer\s+)(?:(?={_TOKEN}*\d){_TOKEN}{{8,}}|{_TOKEN}{{24,}})=*"),
        re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
    )

    def __init__(self, secrets: list[str]) -> None:
        ordered = sorted(secrets, key=lambda s: (-len(s), s))
        self._exact = re.compile("|".join(re.escape(s) for s in ordered))

    def text(self, value: str) -> str:
        value = self._exact.sub(MASK, value)
        if not (("_" in value and "gh" in value) or "sk-" in value or "xox" in value
                or "://" in value or "bearer" in value.lower()
                or "authorization" in value.lower()):
            return value
        value = self._WHOLE.sub(MASK, value)
        for pattern in self._LABELLED:
            value = pattern.sub(lambda m: m.group(1) + MASK, value)
        return value


def seconds(function: Callable[[str], str], text: str, repeat: int) -> float:
    """Median CPU seconds of one call: the process's CPU time, not the wall clock, so that
    other jobs on a shared machine count less (they still slow the caches)."""
    times = []
    for _ in range(repeat):
        # a new string each time: a redactor returns a text it returned lately unscanned
        fresh = text[:-1] + text[-1:]
        start = time.process_time()
        function(fresh)
        times.append(time.process_time() - start)
    return statistics.median(times)


def transcript_seconds(reply: str, repeat: int) -> tuple[float, float]:
    """(median CPU seconds of masking a transcript quoting `reply`, masked on receipt;
    the same for a redactor that has not seen the reply: a scan of all of it)."""
    quoting, scanning = [], []
    for _ in range(repeat):
        ours = Redactor(SECRETS)
        received = ours.clean_text(reply[:-1] + reply[-1:])
        transcript = f"## turn 1: prompt\n\nstep 1\n\n## turn 2: reply\n\n{received}\n"
        start = time.process_time()
        ours.text(transcript)
        quoting.append(time.process_time() - start)
        fresh = transcript[:-1] + transcript[-1:]
        start = time.process_time()
        Redactor(SECRETS).text(fresh)
        scanning.append(time.process_time() - start)
    return statistics.median(quoting), statistics.median(scanning)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0, help="size of each text in MB")
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (median)")
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    ours, previous = Redactor(SECRETS), PreviousRedactor(SECRETS)
    print(f"{'text':<12} {'ours ms/MB':>11} {'ours MB/s':>10} {'previous ms/MB':>15} {'ratio':>6}")
    for name, make in (("code", code_text), ("prose", prose_text),
                       ("token-dense", token_dense_text)):
        text = make(size)
        mb = len(text.encode()) / 1_000_000
        new = seconds(ours.text, text, args.repeat)
        old = seconds(previous.text, text, args.repeat)
        print(f"{name:<12} {new * 1000 / mb:>11.2f} {mb / new:>10.0f} "
              f"{old * 1000 / mb:>15.2f} {old / new:>5.1f}x")
    quoting, scanning = transcript_seconds(code_text(size), args.repeat)
    print(f"transcript quoting a masked {args.mb:g} MB reply: {quoting * 1000:.2f} ms "
          f"(a scan of all of it: {scanning * 1000:.2f} ms, {scanning / quoting:.1f}x)")


if __name__ == "__main__":
    main()
