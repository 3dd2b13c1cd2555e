"""`delivery action init` through the CLI (SPEC §13 "Setting it up"): the three workflows
and `.github/delivery-repos` written (the docs' files for the docs' example), zizmor-clean,
never overwritten unasked; the App, its permissions, the secrets and the labels printed,
or the labels created on GitHub (the fake, over real HTTP)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from delivery.testing.cli import CliResult, invoke
from delivery.testing.github import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "workflows"
sys.path.insert(0, str(ROOT / "tests"))
from action_helpers import zizmor_findings  # noqa: E402

PIN = "a" * 40


def init(tmp_path: Path, *options: str | Path) -> CliResult:
    result = invoke("action", "init", *options, cwd=tmp_path)
    assert "Traceback" not in result.err
    return result


def listing(tmp_path: Path, text: str = "api=octo/api\nocto/web\n") -> Path:
    path = tmp_path / "repos.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_docs_example_is_what_init_writes(tmp_path: Path) -> None:
    result = init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control")
    assert result.code == 0, result.err
    written = tmp_path / ".github" / "workflows"
    for name, doc in [("delivery.yml", "delivery.yml"), ("delivery-work.yml",
                      "delivery-work.yml"), ("relay/delivery.yml", "delivery-relay.yml")]:
        assert (written / name).read_text(encoding="utf-8") == \
            (DOCS / doc).read_text(encoding="utf-8"), name


def test_the_repositories_go_to_delivery_repos_one_folder_a_line(tmp_path: Path) -> None:
    assert init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control",
                "--out", "wf").code == 0
    lines = [line for line in (tmp_path / "delivery-repos").read_text(
        encoding="utf-8").splitlines() if not line.startswith("#")]
    assert lines == ["api=octo/api", "web=octo/web"]


def test_the_action_given_is_pinned_in_every_written_workflow(tmp_path: Path) -> None:
    result = init(tmp_path, "--repos", listing(tmp_path, "acme/api\n"), "--state-repo",
                  "acme/ops", "--action", f"acme/delivery@{PIN}", "--out", "wf")
    assert result.code == 0, result.err
    for path in (tmp_path / "wf").rglob("*.yml"):
        text = path.read_text(encoding="utf-8")
        assert "your-org" not in text and "0123456789abcdef" not in text, path
        assert f"acme/delivery@{PIN}" in text or \
            f"acme/delivery/.github/workflows/delivery-relay.yml@{PIN}" in text, path
    relay = (tmp_path / "wf" / "relay" / "delivery.yml").read_text(encoding="utf-8")
    assert "control-repository: acme/ops" in relay


def test_every_written_workflow_passes_zizmor(tmp_path: Path) -> None:
    assert init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control",
                "--action", f"octo/delivery@{PIN}").code == 0
    paths = sorted((tmp_path / ".github" / "workflows").rglob("*.yml"))
    assert len(paths) == 3
    for path in paths:
        assert zizmor_findings(path) == [], path


def test_an_existing_file_is_not_overwritten_unless_forced(tmp_path: Path) -> None:
    control = tmp_path / ".github" / "workflows" / "delivery.yml"
    control.parent.mkdir(parents=True)
    control.write_text("# my own\n", encoding="utf-8")
    refused = init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control")
    assert refused.code == 2
    assert "exist already" in refused.err and "--force" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    assert control.read_text(encoding="utf-8") == "# my own\n"
    assert not (tmp_path / ".github" / "delivery-repos").exists()
    forced = init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control",
                  "--force")
    assert forced.code == 0 and "name: delivery" in control.read_text(encoding="utf-8")


def test_the_printed_steps_name_the_apps_permissions_installs_secrets_and_labels(
        tmp_path: Path) -> None:
    result = init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control")
    text = result.out
    for line in ("Contents: read and write", "Pull requests: read and write",
                 "Issues: read and write", "Checks: read-only", "Commit statuses: read and write",
                 "Actions: read-only", "octo/api", "octo/web", "DELIVERY_APP_ID",
                 "DELIVERY_APP_PRIVATE_KEY", "ANTHROPIC_API_KEY", "delivery:stop",
                 "subscribe to no events", "one line in .github/delivery-repos"):
        assert line in text, line
    assert "secrets.GITHUB_TOKEN" not in text


def test_org_and_topic_choose_the_repositories_through_githubs_search(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/api", topics=("payments",))
    fake_github_env.create_repo("octo/web", topics=("payments",))
    fake_github_env.create_repo("octo/blog")
    result = init(tmp_path, "--org", "octo", "--topic", "payments", "--state-repo",
                  "octo/control")
    assert result.code == 0, result.err
    assert "api=octo/api\nweb=octo/web\n" in (tmp_path / ".github" / "delivery-repos"
                                              ).read_text(encoding="utf-8")


def test_create_labels_finds_or_creates_them_in_the_control_repository(
        tmp_path: Path, fake_github_env: FakeGitHub) -> None:
    fake_github_env.create_repo("octo/control")
    fake_github_env.repository("octo/control").label_set["delivery"] = ("ededed", "mine")
    result = init(tmp_path, "--repos", listing(tmp_path), "--state-repo", "octo/control",
                  "--create-labels")
    assert result.code == 0, result.err
    labels = fake_github_env.repository("octo/control").label_set
    assert labels["delivery"] == ("ededed", "mine")  # a label found is kept as it is
    assert set(labels) == {"delivery", "delivery:stop"}
    assert "delivery (exists), delivery:stop (created)" in result.out


@pytest.mark.parametrize(("options", "wanted"), [
    (("--state-repo", "control"), "--state-repo 'control': is not owner/name"),
    (("--state-repo", "octo/control"), "was given no repositories"),
    (("--state-repo", "octo/control", "--action", "octo/delivery@main"),
     "is not OWNER/REPO@SHA"),
])
def test_bad_options_are_refused_in_one_line_with_the_fix(
        tmp_path: Path, options: tuple[str, ...], wanted: str) -> None:
    extra = ("--repos", str(listing(tmp_path))) if "no repositories" not in wanted else ()
    result = init(tmp_path, *options, *extra)
    assert result.code == 2 and wanted in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_target_of_another_owner_is_refused_one_app_installation_reaches_one_owner(
        tmp_path: Path) -> None:
    extra = ("--repos", str(listing(tmp_path, "other/api\n")))
    options = ("--state-repo", "octo/control")
    wanted = "other/api: are not owned by octo like the control repository"
    result = init(tmp_path, *options, *extra)
    assert result.code == 2 and wanted in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_the_delivery_repos_file_given_as_the_list_is_completed_in_place_comments_kept(
        tmp_path: Path) -> None:
    # the README's step 1: the targets listed in .github/delivery-repos, then init on it
    listed = tmp_path / ".github" / "delivery-repos"
    listed.parent.mkdir()
    listed.write_text("# payments\napi=octo/api\nocto/web\n", encoding="utf-8")
    result = init(tmp_path, "--repos", ".github/delivery-repos", "--state-repo",
                  "octo/control", "--out", ".github/workflows")
    assert result.code == 0, result.err
    assert listed.read_text(encoding="utf-8") == "# payments\napi=octo/api\nweb=octo/web\n"
    assert (tmp_path / ".github" / "workflows" / "delivery.yml").exists()
