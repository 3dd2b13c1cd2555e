"""A GitHub App's credentials from the environment (SPEC §7.1): `GITHUB_APP_ID` with
`GITHUB_APP_PRIVATE_KEY` (the key's PEM text, or a path to its file) or
`GITHUB_APP_PRIVATE_KEY_FILE`. Read and checked before a run writes anything, without
PyGithub (`delivery.forges.github_auth` mints the tokens)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from delivery.errors import RunRefused

APP_ID, APP_KEY, APP_KEY_FILE = ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY",
                                 "GITHUB_APP_PRIVATE_KEY_FILE")


@dataclass(frozen=True)
class AppCredentials:
    app_id: str
    private_key: str = field(repr=False)  # PEM text



def uses_app(environ: Mapping[str, str]) -> bool:
    return any(environ.get(name, "").strip() for name in (APP_ID, APP_KEY, APP_KEY_FILE))


def app_credentials(environ: Mapping[str, str]) -> AppCredentials | None:
    """The App's credentials from `environ`; None when none of its variables is set.
    RunRefused, naming the variable and the fix, when they are incomplete or the key is
    not a PEM private key. `GITHUB_APP_PRIVATE_KEY` holds the key's text when it contains
    `-----BEGIN`, else it is a path to the key's file (as `GITHUB_APP_PRIVATE_KEY_FILE`)."""
    if not uses_app(environ):
        return None
    app_id = environ.get(APP_ID, "").strip()
    text, file = environ.get(APP_KEY, "").strip(), environ.get(APP_KEY_FILE, "").strip()
    if not app_id:
        raise RunRefused(APP_ID, f"is not set, and {APP_KEY if text else APP_KEY_FILE} is",
                         "set GITHUB_APP_ID to the App's id (its settings page, 'App ID')")
    if text and file:
        raise RunRefused(APP_KEY_FILE, f"and {APP_KEY} are both set",
                         "set only one of them: the key's text or its file")
    if not text and not file:
        raise RunRefused(APP_KEY, f"is not set, and {APP_ID} is",
                         f"set {APP_KEY} to the App's private key (the .pem file's text or "
                         f"its path), or unset {APP_ID} to use GITHUB_TOKEN")
    variable = APP_KEY_FILE if file else APP_KEY
    if file or "-----BEGIN" not in text:
        path = Path(file or text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            what = type(error).__name__ if isinstance(error, UnicodeDecodeError) else \
                (error.strerror or type(error).__name__)
            raise RunRefused(variable, f"is neither a PEM key nor a file that can be read "
                             f"({what})",
                             "set it to the App's private key (-----BEGIN … the whole .pem "
                             "text) or to the path of its .pem file") from None
    elif "\\n" in text and "\n" not in text:
        text = text.replace("\\n", "\n")  # a key pasted into one line of a .env file
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RunRefused(variable, f"is not a PEM private key ({reason[:120]})",
                         "use the .pem file GitHub gave when the App's private key was "
                         "generated (Settings → Developer settings → GitHub Apps)") from None
    return AppCredentials(app_id, text)
