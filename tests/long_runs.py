"""Whether this pytest run is a long one: `--long` (or DELIVERY_SOAK=long). Long runs add the
soaks' deeper seeds and the tests marked `long` (campaigns of 50-200 repositories); the
default suite and CI leave those out to stay within minutes."""

from __future__ import annotations

import os

import pytest


def is_long(config: pytest.Config) -> bool:
    return bool(config.getoption("--long")) or os.environ.get("DELIVERY_SOAK") == "long"
