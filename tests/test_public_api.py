"""The package's public API: the names `delivery/__init__.py` promises, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import delivery


def test_all_lists_exactly_the_lazily_loaded_names() -> None:
    assert set(delivery.__all__) == {"__version__", *delivery._EXPORTS}


@pytest.mark.parametrize("name", [n for n in delivery.__all__ if n != "__version__"])
def test_every_public_name_resolves_to_the_module_that_defines_it(name: str) -> None:
    value = getattr(delivery, name)
    assert value.__name__ == name
    assert value.__module__.startswith("delivery.")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        delivery.nope  # noqa: B018


def test_importing_the_package_does_not_import_the_engine() -> None:
    code = "import sys, delivery; print('delivery.engine.runner' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
