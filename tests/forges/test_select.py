"""Which forge a run uses, and the local forge's settings in delivery.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from delivery.errors import ForgeError, RunRefused
from delivery.forges.local import LocalForge
from delivery.forges.select import configured_checks, forge_kind, local_settings, open_forge


def test_paths_mean_the_local_forge_and_owner_name_means_github(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()
    assert forge_kind([str(tmp_path / "web"), "./api"], None, tmp_path) == "local"
    assert forge_kind(["octo/web", str(tmp_path / "web")], None, tmp_path) == "github"
    assert forge_kind(["octo/web"], "local", tmp_path) == "local"


def test_an_owner_name_that_exists_as_a_path_is_a_path(tmp_path: Path) -> None:
    (tmp_path / "octo" / "web").mkdir(parents=True)
    assert forge_kind(["octo/web"], None, tmp_path) == "local"


def test_github_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(ForgeError, match="GITHUB_TOKEN"):
        open_forge("github", environ={})


def test_the_local_forge_gets_the_check_commands() -> None:
    forge = open_forge("local", checks={"web": "pytest -q"})
    assert isinstance(forge, LocalForge) and forge.checks == {"web": "pytest -q"}


def test_checks_come_from_delivery_toml(tmp_path: Path) -> None:
    (tmp_path / "delivery.toml").write_text(
        '[forge.local.checks]\nweb = "pytest -q"\napi = "make test"\n\n[other]\nx = 1\n')
    assert configured_checks(tmp_path) == {"web": "pytest -q", "api": "make test"}


def test_required_approvals_come_from_delivery_toml(tmp_path: Path) -> None:
    (tmp_path / "delivery.toml").write_text("[forge.local]\nrequired_approvals = 2\n")
    assert local_settings(tmp_path) == ({}, 2)
    forge = open_forge("local", required_approvals=2)
    assert isinstance(forge, LocalForge) and forge.required_approvals == 2


def test_no_delivery_toml_means_no_checks(tmp_path: Path) -> None:
    assert configured_checks(tmp_path) == {}


@pytest.mark.parametrize(("text", "problem"), [
    ("[forge.local.checks\n", "not valid TOML"),
    ("[forge.local.checks]\nweb = 3\n", "forge.local.checks.web"),
    ("[forge.local]\ncheck = 'x'\n", "forge.local.check"),
    ("[forge.local]\nrequired_approvals = -1\n", "forge.local.required_approvals"),
])
def test_a_wrong_delivery_toml_is_refused_naming_the_setting(tmp_path: Path, text: str,
                                                             problem: str) -> None:
    (tmp_path / "delivery.toml").write_text(text)
    with pytest.raises(RunRefused, match=problem):
        configured_checks(tmp_path)


def test_a_delivery_toml_that_is_not_utf8_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "delivery.toml").write_bytes(b"[forge.local.checks]\nweb = '\xff'\n")
    with pytest.raises(RunRefused, match=r"delivery\.toml.*not UTF-8"):
        configured_checks(tmp_path)
