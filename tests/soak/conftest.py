"""Soak and chaos suites: small counts by default (CI), deeper with `--long` or
DELIVERY_SOAK=long. A test taking `soak_seed` runs once per seed."""

from __future__ import annotations

import pytest
from long_runs import is_long

SEEDS = {"short": 2, "long": 30}
PEOPLE_SEEDS = {"short": 20, "long": 100}  # the people soak (tests/soak/test_people_soak.py)
# the campaign chaos suite (tests/soak/test_campaign_chaos.py): ~30 s a killed campaign
CAMPAIGN_SEEDS = {"short": 2, "long": 12}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "soak_seed" in metafunc.fixturenames:
        count = SEEDS["long" if is_long(metafunc.config) else "short"]
        metafunc.parametrize("soak_seed", range(count))
    if "people_seed" in metafunc.fixturenames:
        count = PEOPLE_SEEDS["long" if is_long(metafunc.config) else "short"]
        metafunc.parametrize("people_seed", range(count))
    if "campaign_seed" in metafunc.fixturenames:
        count = CAMPAIGN_SEEDS["long" if is_long(metafunc.config) else "short"]
        metafunc.parametrize("campaign_seed", range(count))
    if "chaos_point" in metafunc.fixturenames:
        # Points 0 and 1 are the PR create and the first merge, the rest drawn at random:
        # short keeps both and one drawn point (each drawn point measured 11-23 s on the
        # shared 2-core machine); --long draws 18 more.
        count = 20 if is_long(metafunc.config) else 3
        metafunc.parametrize("chaos_point", range(count))

