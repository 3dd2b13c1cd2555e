"""Errors about the token say what the Action needs — a GitHub App installation token —
and never advise the default GITHUB_TOKEN, which reaches no other repository and whose
pushes start no CI (SPEC §13 "Setting it up")."""

from __future__ import annotations

from pathlib import Path

import pytest

from delivery.testing.cli import invoke


@pytest.mark.parametrize("in_action", [False, True])
def test_a_missing_token_asks_for_an_app_installation_token_never_the_default_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_action: bool) -> None:
    for name in ("GITHUB_TOKEN", "GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY"):
        monkeypatch.delenv(name, raising=False)
    if in_action:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = invoke("preflight", "--repo", "api=octo/api", cwd=tmp_path)
    assert result.code == 2, result.err
    assert "GITHUB_TOKEN: is not set" in result.err
    assert "App installation token" in result.err
    assert "secrets.GITHUB_TOKEN" not in result.err
    assert "Traceback" not in result.err
