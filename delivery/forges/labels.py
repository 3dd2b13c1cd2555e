"""Labels of a GitHub repository, found or created (`delivery action init --create-labels`:
the `delivery` label starts a delivery, `delivery:stop` stops one).

    ensure_labels(client, "octo/control", {"delivery": ("0e8a16", "Start a delivery")})
    # -> {"delivery": "created"} or {"delivery": "exists"}
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from probes.github_client import GitHubClient
from probes.github_errors import GitHubError


def ensure_labels(client: GitHubClient, repository: str,
                  labels: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """Each label (name -> (colour, description)) found or created; "exists" or "created"
    per name. A label created meanwhile by someone else (422 already_exists) exists."""
    done: dict[str, str] = {}
    for name, (color, description) in labels.items():
        try:
            client.rest("GET", f"/repos/{repository}/labels/{quote(name, safe='')}")
            done[name] = "exists"
            continue
        except GitHubError as error:
            if error.status != 404:
                raise
        try:
            client.rest_once("POST", f"/repos/{repository}/labels",
                             json={"name": name, "color": color, "description": description})
            done[name] = "created"
        except GitHubError as error:
            if error.status != 422:
                raise
            done[name] = "exists"
    return done
