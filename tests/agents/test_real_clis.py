"""The `claude` and `codex` presets against the real CLIs (pinned: .ci/run installs them),
pointed at the scripted model servers of delivery.testing.model_servers on 127.0.0.1 with
an empty HOME: whole deliveries, sessions continued (corrections, `full` threads, after
`delivery resume`), usage as served, the CLI's own error text. Skipped, saying so, when a
CLI is not installed — failed instead in CI."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import cli as invoke
from engine_helpers import reply, write_flow
from real_cli_helpers import PINNED, RealCli, find_cli, version_of

from delivery.cli.demo import DemoProgress, Reviewer, make_samples
from delivery.cli.demo_files import (
    API_BUGGY,
    API_FIXED,
    API_TEST,
    TICKET,
    WEB_ESCAPED,
    WEB_FIRST,
    WEB_TEST,
    WEB_TEST_ESCAPED,
)
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.local import LocalForge
from delivery.testing import flow
from delivery.testing.model_servers import (
    AnthropicServer,
    ResponsesServer,
    Step,
    Tokens,
    api_error,
)
from delivery.testing.two_repos import bundled_workflow

CLIS = sorted(PINNED)
SERVED = Tokens(input=40, output=15, cache_read=300, cache_write=25)  # like real traffic


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


@pytest.fixture(scope="session")
def responses_server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as server:
        yield server


@pytest.fixture(params=CLIS)
def cli(request: pytest.FixtureRequest, anthropic_server: AnthropicServer,
        responses_server: ResponsesServer) -> Iterator[RealCli]:
    name = request.param
    server = anthropic_server if name == "claude" else responses_server
    server.reset()
    yield RealCli(name, find_cli(name), server)
    server.reset()


@pytest.fixture
def claude(anthropic_server: AnthropicServer) -> Iterator[RealCli]:
    """Claude Code alone (what only it reports: cost)."""
    anthropic_server.reset()
    yield RealCli("claude", find_cli("claude"), anthropic_server)
    anthropic_server.reset()


def stage_events(outcome_dir: Path) -> list[dict[str, Any]]:
    lines = (outcome_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "stage_finished"]


def recorded_tokens(run_dir: Path) -> tuple[int, int]:
    stages = [e.get("usage") or {} for e in stage_events(run_dir)]
    return (sum(s.get("input_tokens", 0) for s in stages),
            sum(s.get("output_tokens", 0) for s in stages))


def run_flow(cli: RealCli, root: Path, dot: str) -> RunOutcome:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    flow = write_flow(workspace, dot)
    world = World(environ=cli.environ(root / "home"))
    return start_run(RunRequest(workflow=flow, workspace=workspace, agent=cli.name,
                                run_dir=root / "run"), world)


def test_the_pinned_versions_are_the_ones_tested(cli: RealCli) -> None:
    assert PINNED[cli.name][1] in version_of(cli.program)


def test_deliver_dot_repairs_ci_with_an_edit_of_the_cli_and_merges_both(
        cli: RealCli, tmp_path: Path) -> None:
    scope = {"type": "leaf", "ticket": TICKET, "parent": None}

    def summary(text: str, **more: Any) -> str:
        return reply({"summary": text, **more})

    cli.server.script(
        cli.say(json.dumps({"context_updates": {"scope": scope}}), SERVED),  # scope
        cli.say(json.dumps({"context_updates": {"plan": "api then web"}}), SERVED),  # plan
        cli.write("api/greeting.py", API_BUGGY, SERVED),  # implement
        cli.write("api/test_greeting.py", API_TEST, SERVED),
        cli.write("web/page.py", WEB_FIRST, SERVED),
        cli.write("web/test_page.py", WEB_TEST, SERVED),
        cli.say(summary("greetings in api and web"), SERVED),
        cli.run(f"{shlex.quote(sys.executable)} -m unittest -q 2>&1 | tail -3", SERVED),
        cli.write("api/greeting.py", API_FIXED, SERVED),  # repair: api's CI failed
        cli.say(summary("api: comma and exclamation mark", answers={}), SERVED),
        cli.write("web/page.py", WEB_ESCAPED, SERVED),  # repair: the review on web
        cli.write("web/test_page.py", WEB_TEST_ESCAPED, SERVED),
        cli.say(summary("web: the name is escaped", answers={}), SERVED))
    remotes = make_samples(tmp_path)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    python = shlex.quote(sys.executable)
    checks = {folder: f"{python} -m unittest -q" for folder in ("api", "web")}
    forge = LocalForge(checks)
    branch = "delivery/demo-1"
    reviewer = Reviewer(forge, remotes, branch, StringIO())
    request = RunRequest(
        workflow=bundled_workflow(), goal="Greet people by name",
        inputs={"ticket": TICKET, "check_command": f"{python} -m compileall -q ."},
        workspace=workspace, run_dir=tmp_path / "run",
        repos={k: str(v) for k, v in remotes.items()}, forge="local",
        branch=branch, agent=cli.name)  # the forge's CI runs the tests; local checks compile
    world = World(forge=forge, git_cache=tmp_path / "cache",
                  environ=cli.environ(tmp_path / "home"))
    outcome = start_run(request, world, observer=DemoProgress(StringIO(), reviewer))
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.path.count("repair") == 2 and "land" in outcome.path
    assert reviewer.approved
    for folder, fixed in (("api", API_FIXED), ("web", WEB_ESCAPED)):
        shown = subprocess.run(["git", "show", "main:" + ("greeting.py" if folder == "api"
                                                            else "page.py")],
                               cwd=remotes[folder], capture_output=True, text=True, check=True)
        assert shown.stdout == fixed  # merged: the CLI's edit is on the default branch
    assert cli.server.remaining == 0
    served = cli.server.served
    assert recorded_tokens(outcome.run_dir) == (served.total_input, served.output)
    assert outcome.usage["input_tokens"] == served.total_input


CORRECTED = flow("""
work  [prompt="Write the note", outputs="summary:text", llm_model="model-a"]
start -> work -> exit
""", goal="Fix it")


def test_a_correction_turn_continues_the_session_and_may_still_write(
        cli: RealCli, tmp_path: Path) -> None:
    cli.server.script(cli.say("I wrote nothing yet (no JSON here)", SERVED),
                      cli.write("note.txt", "written on the correction turn", SERVED),
                      cli.say(reply({"summary": "note written"}), SERVED))
    outcome = run_flow(cli, tmp_path, CORRECTED)
    assert outcome.status == "succeeded", outcome.failure_reason
    note = tmp_path / "ws" / "note.txt"
    assert note.read_text() == "written on the correction turn"
    correction = json.dumps(cli.server.requests[-2].body)
    assert "I wrote nothing yet" in correction  # the same session: the first reply is in it
    assert set(cli.server.models) == {"model-a"}  # the node's model on every turn
    served = cli.server.served
    assert recorded_tokens(outcome.run_dir) == (served.total_input, served.output)


THREAD = flow("""
one   [prompt="Remember the word PELICAN", outputs="summary:text", llm_model="model-a"]
two   [prompt="Write the word into word.txt", outputs="summary:text"]
start -> one -> two -> exit
""", goal="Two steps", graph='default_fidelity="full", thread_id="main"')


def test_a_full_thread_shares_one_session_whose_second_turn_writes(
        cli: RealCli, tmp_path: Path) -> None:
    cli.server.script(cli.say(reply({"summary": "remembered"}), SERVED),
                      cli.write("word.txt", "PELICAN", SERVED),
                      cli.say(reply({"summary": "written"}), SERVED))
    outcome = run_flow(cli, tmp_path, THREAD)
    assert outcome.status == "succeeded", outcome.failure_reason
    assert (tmp_path / "ws" / "word.txt").read_text() == "PELICAN"
    second = json.dumps(cli.server.requests[-2].body)
    assert "Remember the word PELICAN" in second  # node two continued node one's session
    first, *rest = cli.server.models
    assert first == "model-a" and "model-a" not in rest  # no model: not the last stage's
    served = cli.server.served
    assert recorded_tokens(outcome.run_dir) == (served.total_input, served.output)


def delivery_command(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    program = Path(sys.executable).with_name("delivery")
    return subprocess.Popen([str(program), *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_processes_in(directory: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if proc.name.isdigit() and Path(os.readlink(proc / "cwd")) == directory:
                    busy = True
        if not busy:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes still run in {directory}")


def test_a_sigkilled_thread_continues_its_session_after_delivery_resume(
        cli: RealCli, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    flow = write_flow(workspace, THREAD)
    env = {**cli.environ(tmp_path / "home"), "PATH": f"{cli.program.parent}:"
           f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    run_dir = tmp_path / "run"
    victim: list[subprocess.Popen[str]] = []

    def kill_delivery(body: dict[str, Any]) -> Step:  # node two's first request
        os.kill(victim[0].pid, signal.SIGKILL)
        return cli.say("interrupted")  # the orphaned CLI ends its turn (no retries)

    cli.server.script(cli.say(reply({"summary": "remembered"}), SERVED), kill_delivery)
    started = delivery_command("run", str(flow), "--agent", cli.name, "--workspace",
                               str(workspace), "--run-dir", str(run_dir), env=env,
                               cwd=workspace)
    victim.append(started)
    started.communicate(timeout=120)
    assert started.returncode == -signal.SIGKILL
    wait_for_processes_in(workspace)  # the orphaned CLI, which must not take later steps
    before = len(cli.server.requests)
    cli.server.script(cli.write("word.txt", "PELICAN", SERVED),
                      cli.say(reply({"summary": "written"}), SERVED))
    resumed = delivery_command("resume", str(run_dir), "--json", env=env, cwd=workspace)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, out + err
    assert (workspace / "word.txt").read_text() == "PELICAN"
    after_resume = json.dumps(cli.server.requests[before].body)
    assert "Remember the word PELICAN" in after_resume  # the session of node one continued


def test_an_api_error_reported_by_the_cli_is_the_failure_reason(
        cli: RealCli, tmp_path: Path) -> None:
    cli.server.script(api_error("Scripted outage: credit balance too low"))
    outcome = run_flow(cli, tmp_path, CORRECTED)
    assert outcome.status == "failed"
    assert "Scripted outage: credit balance too low" in outcome.failure_reason
    assert "(no stderr)" not in outcome.failure_reason


def test_claude_cost_is_recorded_per_stage_as_increases_and_summed_by_inspect(
        claude: RealCli, tmp_path: Path) -> None:
    cli = claude
    cli.server.script(cli.say(reply({"summary": "remembered"}), SERVED),
                      cli.write("word.txt", "PELICAN", SERVED),
                      cli.say(reply({"summary": "written"}), SERVED))
    outcome = run_flow(cli, tmp_path, THREAD)
    assert outcome.status == "succeeded", outcome.failure_reason
    costs = [e["cost_usd"] for e in stage_events(outcome.run_dir) if "cost_usd" in e]
    assert len(costs) == 2 and all(cost > 0 for cost in costs)
    last_turn = (outcome.run_dir / "two" / "1" / "stdout.txt").read_text().splitlines()[-1]
    session_total = json.loads(last_turn)["total_cost_usd"]  # Claude: per session
    assert sum(costs) == pytest.approx(session_total)
    code, out, err = invoke("inspect", outcome.run_dir, "--json")
    assert code == 0, err
    assert json.loads(out)["cost_usd"] == pytest.approx(session_total)


# Narrowed profiles, and a write each refuses: Claude without Bash (acceptEdits itself
# lets it run `echo … > file`, so the command is a program); Codex in workspace-write
# without /tmp, writing beside the workspace. (Codex's read-only sandbox prints no
# command items at all, so a refusal there cannot be seen; see docs/agents.md.)
NARROW = {
    "claude": ('claude -p --output-format stream-json --verbose --permission-mode acceptEdits'
               ' --allowedTools "Edit Write Read"', "refused.txt"),
    "codex": ('codex exec --json --skip-git-repo-check -c sandbox_mode="workspace-write"'
              ' -c sandbox_workspace_write.exclude_slash_tmp=true'
              ' -c sandbox_workspace_write.exclude_tmpdir_env_var=true'
              ' -c approval_policy="never" -', "../refused.txt"),
}


def test_a_write_the_narrowed_profile_refuses_fails_the_stage_naming_it(
        cli: RealCli, tmp_path: Path) -> None:
    command, target = NARROW[cli.name]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "delivery.toml").write_text(
        f"[profiles.{cli.name}]\nbackend = \"command\"\ncommand = {json.dumps(command)}\n"
        f"output = \"{cli.name}\"\n", encoding="utf-8")
    write = f"python3 -c \"open('{target}', 'w').write('x')\""
    cli.server.script(cli.run(write), cli.say(reply({"summary": "all done"})))
    outcome = run_flow(cli, tmp_path, CORRECTED)
    assert not (workspace / target).exists()  # the sandbox or the permission mode held
    if cli.name == "codex" and outcome.status == "succeeded":
        # Codex 0.171's known gap (docs/agents.md): its sandbox refused the write, but
        # `codex exec --json` usually prints no command item for it, so nothing on stdout
        # shows the refusal. Not always: in one whole-suite run on the 2-core CI machine it
        # printed the item, and then the stage must fail naming it, as below.
        return
    assert outcome.status == "failed", outcome.failure_reason
    assert "refused" in outcome.failure_reason and "python3 -c" in outcome.failure_reason
