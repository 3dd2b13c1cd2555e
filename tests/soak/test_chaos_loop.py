"""Chaos across the whole loop: the two-repository delivery (worktrees, publish, probe,
merge in order, worktrees removed) run by the `delivery` CLI against the fake GitHub is
SIGKILLed right after the N-th request the fake answers — inside publish (a PR created, its
answer never read), inside merge (a merge applied, its answer never read), right after the
change set's sticky comment was created, during git pushes and fetches — then resumed.
Every time: the same end as an uninterrupted run, the log verifies, no PR is created twice
and none merged twice, and each PR carries exactly one sticky comment with the final
table."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from github_helpers import CI, TWO_REPO_FLOW, TWO_REPOS

from delivery.testing.github import FakeGitHub, faults

pytestmark = pytest.mark.slow  # a soak: deliveries killed and resumed at every point

TICKET = "https://tracker.example/browse/T-11"
REPOS = TWO_REPOS
FLOW = TWO_REPO_FLOW
DELIVERY = str(Path(sys.executable).with_name("delivery"))
POINTS = {"short": 5, "long": 20}


@dataclass
class Ending:
    status: str
    path: list[str]
    # repo -> (PR count, all merged, commits on main: initial + change + merge commit)
    pulls: dict[str, tuple[int, bool, int]]
    creates: list[str]
    merges: list[str]
    requests: list[tuple[str, str]]
    # repo -> the table rows of each sticky comment of the change set on its PR
    comments: dict[str, list[list[str]]]


def applied(fake: FakeGitHub, method: str, suffix: str) -> list[str]:
    return [r.path for r in fake.requests if r.method == method and r.path.endswith(suffix)
            and (200 <= r.status < 300 or r.status == 0)]


def cli(fake: FakeGitHub, tmp: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **fake.env()}
    return subprocess.Popen([DELIVERY, *args], cwd=tmp, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def ending(fake: FakeGitHub, outcome: dict[str, object]) -> Ending:
    pulls = {}
    for name in REPOS.values():
        repo = fake.repository(name)
        commits = subprocess.run(["git", "-C", str(repo.path), "rev-list", "--count",
                                  repo.default_branch], capture_output=True, text=True,
                                 check=True).stdout.strip()
        merged = all(p.merged and p.merge_commit_sha for p in repo.pulls.values())
        pulls[name] = (len(repo.pulls), merged, int(commits))
    comments = {name: [[line.replace(fake.server_url, "") for line in c.body.splitlines()
                        if line.startswith("|")]
                       for c in fake.repository(name).comments.values()
                       if "<!-- delivery:change-set" in c.body] for name in REPOS.values()}
    return Ending(str(outcome["status"]), list(outcome["path"]),  # type: ignore[call-overload]
                  pulls, sorted(applied(fake, "POST", "/pulls")),
                  applied(fake, "PUT", "/merge"),
                  [(r.method, r.path) for r in fake.requests], comments)


def deliver(tmp: Path, kill_after: tuple[str, int] | None) -> tuple[Ending, Path, bool]:
    """Run the delivery (killed after the `kill_after` = (method, n)-th answered request,
    then resumed); its ending, the run directory and whether the kill happened."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "flow.dot").write_text(FLOW, encoding="utf-8")
    (tmp / "ws").mkdir()
    run_dir = tmp / "run"
    with FakeGitHub() as fake:
        for name in REPOS.values():
            fake.create_repo(name, files={"app.py": "print(0)\n"}, check_rules=(CI,))
        args = ["run", "flow.dot", "--workspace", "ws", "--run-dir", str(run_dir),
                "--input", f"ticket={TICKET}", "--cache", str(tmp / "cache"), "--json"]
        for folder, repo in REPOS.items():
            args += ["--repo", f"{folder}={repo}"]
        proc = cli(fake, tmp, *args)
        if kill_after is not None:
            method, count = kill_after
            fake.inject(faults.between(lambda: os.kill(proc.pid, signal.SIGKILL),
                                       method=method, path="/", after=count))
        out, err = proc.communicate(timeout=120)
        killed = proc.returncode == -signal.SIGKILL
        if killed:
            proc = cli(fake, tmp, "resume", str(run_dir), "--json")
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (kill_after, out, err)
        return ending(fake, json.loads(out)), run_dir, killed


def kill_points(requests: list[tuple[str, str]], count: int) -> list[tuple[str, int]]:
    """(method, n): after the n-th answered request of that method. The first three are
    the PR create (publish), the merge of the first PR and the first sticky comment's
    create; the others are drawn at random."""
    def point(index: int) -> tuple[str, int]:
        method = requests[index][0]
        return method, sum(1 for m, _ in requests[:index + 1] if m == method)

    create = next(i for i, (m, p) in enumerate(requests) if m == "POST" and p.endswith("/pulls"))
    merge = next(i for i, (m, p) in enumerate(requests) if m == "PUT" and p.endswith("/merge"))
    comment = next(i for i, (m, p) in enumerate(requests)
                   if m == "POST" and p.endswith("/comments"))
    rng = random.Random(15)
    drawn = rng.sample(range(len(requests) - 1), min(count, len(requests) - 1))
    return [point(i) for i in [create, merge, comment, *drawn]][:count]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Ending:
    return deliver(tmp_path_factory.mktemp("reference"), None)[0]


def test_the_uninterrupted_delivery_merges_both_prs_in_order(uninterrupted: Ending) -> None:
    assert uninterrupted.status == "succeeded"
    assert uninterrupted.pulls == {"octo/web": (1, True, 3), "octo/api": (1, True, 3)}
    assert uninterrupted.merges == ["/api/v3/repos/octo/api/pulls/1/merge",
                                    "/api/v3/repos/octo/web/pulls/1/merge"]
    for name in REPOS.values():  # one sticky comment per PR, its table the final one
        [table] = uninterrupted.comments[name]
        assert [row.split("|")[3].strip() for row in table[2:]] == ["MERGED", "MERGED"]


def test_a_delivery_killed_at_any_point_and_resumed_ends_as_an_uninterrupted_one(
        uninterrupted: Ending, tmp_path: Path, chaos_point: int) -> None:
    points = kill_points(uninterrupted.requests, chaos_point + 1)
    kill_after = points[chaos_point]
    print(f"kill after the {kill_after[1]}-th {kill_after[0]} request")
    end, run_dir, killed = deliver(tmp_path / "chaos", kill_after)
    assert killed, kill_after
    assert (end.status, end.path) == (uninterrupted.status, uninterrupted.path)
    assert end.pulls == uninterrupted.pulls  # one PR each, merged, one merge commit each
    assert end.creates == uninterrupted.creates  # no PR created twice
    assert end.merges == uninterrupted.merges  # merged once each, api first
    assert end.comments == uninterrupted.comments  # one sticky comment each, final table
    verified = subprocess.run([DELIVERY, "verify", str(run_dir)], capture_output=True,
                              text=True, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
