"""Choosing the repositories (SPEC §12): `--repos-from FILE`, `--org ORG` with `--topic` and
`--search` (GitHub's repository search, served by the fake GitHub over real HTTP), folder
names made from repository names, clashes and duplicates refused, the resolved list printed
before anything runs — on `delivery run` and `delivery preflight`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from git_helpers import make_remote

from delivery.store.runstore import RunDirectory
from delivery.testing import flow
from delivery.testing.cli import CliResult, invoke
from delivery.testing.github import FakeGitHub

# a run that touches no folder: what is checked is which folders it was given
NOTHING = flow("start -> exit")


def run_nothing(tmp_path: Path, *options: str | Path) -> CliResult:
    workflow = tmp_path / "nothing.dot"
    workflow.write_text(NOTHING)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    result = invoke("run", workflow, "--workspace", workspace, "--json", *options,
                    cwd=tmp_path)
    assert "Traceback" not in result.err
    return result


def folders_of(result: CliResult) -> dict[str, str]:
    assert result.code == 0, result.err
    return dict(RunDirectory.open(Path(json.loads(result.out)["run_dir"]))
                .read_run_info().repos)


def test_repos_from_reads_names_locations_comments_and_blank_lines(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    for name in ("octo/my-api", "octo/web", "octo/docs.site"):
        fake_github_env.create_repo(name)
    listing = tmp_path / "repos.txt"
    listing.write_text("# the services of the change\n\nocto/my-api\n"
                       "front=octo/web   # the web app\n  octo/docs.site\n")
    result = run_nothing(tmp_path, "--repos-from", listing)
    assert folders_of(result) == {"my_api": "octo/my-api", "front": "octo/web",
                                  "docs_site": "octo/docs.site"}
    assert "my_api = octo/my-api" in result.err  # the resolved list, before the run
    assert "front = octo/web" in result.err


def test_repos_from_takes_local_paths_relative_to_the_file(tmp_path: Path) -> None:
    lists = tmp_path / "lists"
    lists.mkdir()
    api = make_remote(lists, "billing-api")
    listing = lists / "repos.txt"
    listing.write_text("billing-api.git\n")
    result = run_nothing(tmp_path, "--repos-from", listing)
    assert folders_of(result) == {"billing_api": str(api)}


def test_org_takes_its_repositories_without_archived_ones_forks_or_other_owners(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api")
    fake_github_env.create_repo("octo/web-app")
    fake_github_env.create_repo("octo/old", archived=True)
    fake_github_env.create_repo("octo/copy", fork=True)
    fake_github_env.create_repo("other/api2")
    result = run_nothing(tmp_path, "--org", "octo")
    assert folders_of(result) == {"api": "octo/api", "web_app": "octo/web-app"}
    assert "api = octo/api" in result.err and "web_app = octo/web-app" in result.err


def test_org_topics_must_all_match_and_search_narrows_further(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api", topics=("payments", "python"))
    fake_github_env.create_repo("octo/web", topics=("payments",))
    fake_github_env.create_repo("octo/ledger", topics=("payments", "python"),
                                description="the billing ledger")
    both = run_nothing(tmp_path, "--org", "octo", "--topic", "payments", "--topic", "python")
    assert folders_of(both) == {"api": "octo/api", "ledger": "octo/ledger"}
    searched = run_nothing(tmp_path, "--org", "octo", "--topic", "payments",
                           "--search", "billing")
    assert folders_of(searched) == {"ledger": "octo/ledger"}
    asked = [r for r in fake_github_env.requests if r.path.endswith("/search/repositories")]
    assert asked, "the repositories were not found through GitHub's search"


def test_org_reads_every_page_of_the_search(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    for number in range(101):  # one past a page of 100
        fake_github_env.create_repo(f"octo/service-{number:03}", files={"a": "a"})
    folders = folders_of(run_nothing(tmp_path, "--org", "octo"))
    assert len(folders) == 101 and folders["service_100"] == "octo/service-100"


def test_org_and_repo_are_a_union(tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api", topics=("payments",))
    fake_github_env.create_repo("octo/web")
    fake_github_env.create_repo("acme/tools")
    result = run_nothing(tmp_path, "--repo", "tools=acme/tools", "--org", "octo",
                         "--topic", "payments")
    assert folders_of(result) == {"tools": "acme/tools", "api": "octo/api"}


def test_a_repository_given_twice_is_refused_naming_both_sources(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api")
    code, _, err = run_nothing(tmp_path, "--repo", "backend=octo/api", "--org", "octo")
    assert code == 2
    assert "octo/api" in err and "--repo backend=octo/api" in err and "--org octo" in err
    assert not (tmp_path / "ws" / ".delivery").exists()


def test_two_repositories_giving_one_folder_name_are_refused_naming_both(
        tmp_path: Path) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text("octo/my-api\nacme/my.api\n")
    code, _, err = run_nothing(tmp_path, "--repos-from", listing)
    assert code == 2
    assert "octo/my-api" in err and "acme/my.api" in err and "'my_api'" in err
    assert "NAME=" in err  # how to name one of them
    assert len(err.strip().splitlines()) == 1


def test_the_folder_name_folder_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text("octo/folder\n")
    code, _, err = run_nothing(tmp_path, "--repos-from", listing)
    assert code == 2
    assert "'folder'" in err and "reserved" in err and "NAME=" in err


@pytest.mark.parametrize(("line", "problem"), [
    ("api=", "names no repository"),
    ("octo/a b", "is not owner/name or a path"),
    ("9lives=octo/x", "is not an identifier"),
])
def test_a_bad_line_of_the_list_is_refused_naming_its_line(
        tmp_path: Path, line: str, problem: str) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# ok\n{line}\n")
    code, _, err = run_nothing(tmp_path, "--repos-from", listing)
    assert code == 2
    assert f"{listing}:2" in err and problem in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_missing_list_file_is_refused_in_one_line(tmp_path: Path) -> None:
    code, _, err = run_nothing(tmp_path, "--repos-from", tmp_path / "nope.txt")
    assert code == 2
    assert "nope.txt" in err and "cannot be read" in err


def test_an_org_whose_search_finds_nothing_is_refused(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api")
    code, _, err = run_nothing(tmp_path, "--org", "octo", "--topic", "nothing-has-it")
    assert code == 2
    assert "found no repository" in err and "--topic" in err


def test_org_without_a_token_is_refused(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    code, _, err = run_nothing(tmp_path, "--org", "octo")
    assert code == 2 and "GITHUB_TOKEN" in err


def test_a_topic_that_would_change_the_query_is_refused(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    code, _, err = run_nothing(tmp_path, "--org", "octo", "--topic", "x org:other")
    assert code == 2 and "--topic 'x org:other'" in err
    assert not fake_github_env.requests


def test_preflight_checks_the_repositories_of_an_org(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api")
    fake_github_env.create_repo("octo/web")
    code, out, err = invoke("preflight", "--org", "octo", "--json", cwd=tmp_path)
    assert code == 0, err
    assert "api = octo/api" in err
    report = json.loads(out)
    assert sorted(folder["folder"] for folder in report["folders"]) == ["api", "web"]


def test_preflight_without_any_repository_is_refused(tmp_path: Path) -> None:
    code, _, err = invoke("preflight", cwd=tmp_path)
    assert code == 2
    assert "--repo" in err and "--repos-from" in err and "--org" in err
