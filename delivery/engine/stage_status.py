"""A stage's status.json text (the engine's and a foreach folder run's)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def status_text(data: Mapping[str, Any]) -> str:
    """One member per line, sorted: `json.dumps(indent=2)` reads the same but runs the
    pure-Python encoder, which cost more than the rest of writing the file."""
    members = (f"  {json.dumps(key)}: {_VALUE.encode(data[key])}" for key in sorted(data))
    return "{\n" + ",\n".join(members) + "\n}\n"


_VALUE = json.JSONEncoder(separators=(", ", ": "))  # built once, not per call
