"""The replay agent backend and agent profiles (SPEC §5)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from delivery.agents.base import AgentBackend, AgentError
from delivery.agents.registry import make_backend
from delivery.agents.replay import ReplayBackend
from delivery.errors import RunRefused


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_replies_are_consumed_in_order_across_visits_and_corrections(tmp_path: Path) -> None:
    backend = ReplayBackend({"review": ["first", "correction", "second visit"]})
    first_visit = backend.open_session("review", workspace=tmp_path)
    assert first_visit.send("prompt 1") == "first"
    assert first_visit.send("fix it") == "correction"
    second_visit = backend.open_session("review", workspace=tmp_path)
    assert second_visit.send("prompt 2") == "second visit"
    assert backend.prompts == [("review", "prompt 1"), ("review", "fix it"),
                               ("review", "prompt 2")]


def test_each_node_has_its_own_cursor(tmp_path: Path) -> None:
    backend = ReplayBackend({"plan": ["p1", "p2"], "build": ["b1"]})
    assert backend.open_session("plan", workspace=tmp_path).send("x") == "p1"
    assert backend.open_session("build", workspace=tmp_path).send("x") == "b1"
    assert backend.open_session("plan", workspace=tmp_path).send("x") == "p2"


def test_running_out_is_an_agent_error_naming_the_node(tmp_path: Path) -> None:
    backend = ReplayBackend({"review": ["only"]}, source="replies.json")
    session = backend.open_session("review", workspace=tmp_path)
    session.send("one")
    with pytest.raises(AgentError) as caught:
        session.send("two")
    message = str(caught.value)
    assert "no reply left for node 'review' (it had 1)" in message and "replies.json" in message


def test_node_without_entry_runs_out_at_once(tmp_path: Path) -> None:
    backend = ReplayBackend({"review": ["r"]})
    with pytest.raises(AgentError, match="node 'ship' \\(it had 0\\)"):
        backend.open_session("ship", workspace=tmp_path).send("go")


def test_save_and_restore_round_trip(tmp_path: Path) -> None:
    replies = {"plan": ["p1", "p2", "p3"], "build": ["b1", "b2"]}
    before = ReplayBackend(replies)
    before.open_session("plan", workspace=tmp_path).send("x")
    before.open_session("plan", workspace=tmp_path).send("x")
    before.open_session("build", workspace=tmp_path).send("x")
    state = json.loads(json.dumps(before.save_state()))
    assert state == {"cursors": {"build": 1, "plan": 2}}
    after = ReplayBackend(replies)
    after.restore_state(state)
    assert after.open_session("plan", workspace=tmp_path).send("x") == "p3"
    assert after.open_session("build", workspace=tmp_path).send("x") == "b2"


def test_malformed_saved_state_is_refused() -> None:
    with pytest.raises(RunRefused):
        ReplayBackend({}).restore_state({"cursors": {"plan": -1}})


def test_parallel_sessions_never_share_a_reply(tmp_path: Path) -> None:
    backend = ReplayBackend({"branch": [f"r{i}" for i in range(200)]})
    got: list[str] = []

    def worker() -> None:
        session = backend.open_session("branch", workspace=tmp_path)
        for _ in range(50):
            got.append(session.send("go"))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == sorted(f"r{i}" for i in range(200))


def test_from_file_reads_the_replies(tmp_path: Path) -> None:
    path = write(tmp_path / "replies.json", json.dumps({"review": ["hello"]}))
    backend = ReplayBackend.from_file(path)
    assert backend.open_session("review", workspace=tmp_path).send("hi") == "hello"


def test_from_file_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunRefused) as caught:
        ReplayBackend.from_file(tmp_path / "absent.json")
    assert caught.value.subject == "agent" and "absent.json" in caught.value.problem
    assert "does not exist" in caught.value.problem


def test_from_file_not_json_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "replies.json", '{"review": ["unterminated}')
    with pytest.raises(RunRefused) as caught:
        ReplayBackend.from_file(path)
    assert "replies.json" in caught.value.problem and "not JSON" in caught.value.problem


@pytest.mark.parametrize(
    "content", ['["a", "b"]', '{"review": "one reply"}', '{"review": ["ok", 3]}'],
)
def test_from_file_wrong_shape_is_refused(tmp_path: Path, content: str) -> None:
    path = write(tmp_path / "replies.json", content)
    with pytest.raises(RunRefused) as caught:
        ReplayBackend.from_file(path)
    assert caught.value.subject == "agent" and "replies.json" in caught.value.problem
    assert "lists of reply strings" in caught.value.fix


def test_registry_makes_a_replay_backend_relative_to_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "replies.json", json.dumps({"review": ["from the file"]}))
    backend: AgentBackend = make_backend("replay:replies.json", base_dir=tmp_path)
    assert backend.name == "replay"
    assert backend.open_session("review", workspace=tmp_path).send("hi") == "from the file"


@pytest.mark.parametrize("profile", ["aider", "replay", "ollama:llama3"])
def test_registry_refuses_unknown_profiles_naming_the_supported_forms(
        tmp_path: Path, profile: str) -> None:
    with pytest.raises(RunRefused) as caught:
        make_backend(profile, base_dir=tmp_path)
    assert caught.value.subject == "agent" and profile in caught.value.problem
    assert "replay:<file.json>" in caught.value.fix and "openai:<model>" in caught.value.fix


def test_registry_refuses_an_inline_profile_without_its_argument(tmp_path: Path) -> None:
    with pytest.raises(RunRefused) as caught:
        make_backend("replay:", base_dir=tmp_path)
    assert "replay:" in caught.value.subject and "names no replay argument" in caught.value.problem
