"""The areas with golden files, by the name of their folder."""

from __future__ import annotations

from . import dot_area, redaction_area, validation_area
from .store import Area

AREAS: dict[str, Area] = {m.AREA: m for m in (dot_area, validation_area, redaction_area)}
