"""deliver.dot's `feedback` script, rendered and run as a script stage runs it: "new review
feedback" is decided by review and thread ids, never by counts (SPEC §7 `threads.ids`)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from delivery.engine.context import Context
from delivery.engine.templating import Renderer
from delivery.validation.loader import load_workflow

DELIVER = Path(__file__).resolve().parents[2] / "workflows" / "deliver.dot"


@pytest.fixture(scope="module")
def script() -> str:
    workflow = load_workflow(DELIVER)
    return workflow.nodes["feedback"].script


def pr_raw(reviews: Sequence[str] = (), quoted: Sequence[str] = ()) -> str:
    return json.dumps({"reviews": [{"id": r, "author": "ada", "state": "CHANGES_REQUESTED",
                                    "body": "no"} for r in reviews],
                       "threads": [{"id": t, "path": "a.py", "line": 1, "author": "ada",
                                    "body": f"thread {t}"} for t in quoted]})


def feedback(tmp_path: Path, script: str, addressed: str, *, reviews: Sequence[str] = (),
             threads: Sequence[str] = (), quoted: Sequence[str] | None = None) -> dict[str, str]:
    """The facts the script writes for folder `api` in the state given."""
    context = Context({"feedback_addressed": addressed,
                       "api.pr.raw": pr_raw(reviews, threads if quoted is None else quoted),
                       "api.threads.ids": json.dumps(list(threads)),
                       "api.threads.unresolved": len(threads)})
    text = Renderer().render(script, context, folders=["api"], shell=True)
    facts = tmp_path / "facts"
    facts.write_text("")
    subprocess.run(["bash", "-c", text], check=True, cwd=tmp_path,
                   env={**os.environ, "DELIVERY_FACTS": str(facts)})
    return dict(line.split("=", 1) for line in facts.read_text().splitlines())


def test_a_thread_seen_for_the_first_time_is_fresh_feedback(tmp_path: Path, script: str) -> None:
    facts = feedback(tmp_path, script, "", threads=["T1"])
    assert facts == {"fresh_feedback": "true", "feedback_addressed": "api:thread:T1"}


def test_resolving_one_thread_and_opening_another_is_fresh_though_the_count_is_the_same(
        tmp_path: Path, script: str) -> None:
    facts = feedback(tmp_path, script, "api:thread:T1", threads=["T2"])
    assert facts["fresh_feedback"] == "true"
    assert facts["feedback_addressed"].split(",") == ["api:thread:T1", "api:thread:T2"]


def test_threads_already_addressed_are_not_fresh(tmp_path: Path, script: str) -> None:
    facts = feedback(tmp_path, script, "api:thread:T1,api:thread:T2", threads=["T2"])
    assert facts["fresh_feedback"] == "false"


def test_a_new_review_is_fresh_and_an_addressed_one_is_not(tmp_path: Path,
                                                           script: str) -> None:
    assert feedback(tmp_path, script, "api:review:R1", reviews=["R1", "R2"])[
        "fresh_feedback"] == "true"
    assert feedback(tmp_path, script, "api:review:R1", reviews=["R1"])[
        "fresh_feedback"] == "false"


def test_a_thread_whose_text_no_prompt_carried_stays_fresh(tmp_path: Path,
                                                           script: str) -> None:
    # past the probe's quoting bound the id is known but the text was not in the prompt:
    # it is not counted as addressed, so the next round repairs it again
    facts = feedback(tmp_path, script, "", threads=["T1", "T2"], quoted=["T1"])
    assert facts["feedback_addressed"] == "api:thread:T1"
    again = feedback(tmp_path, script, facts["feedback_addressed"], threads=["T1", "T2"],
                     quoted=["T1"])
    assert again["fresh_feedback"] == "true"
