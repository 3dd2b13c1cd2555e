"""A Ctrl-C that arrives while a stage starts its process group is held until the group is
registered (delivery.processes): otherwise the interrupt could fall between the start and
the registration, and the started agent or script would go on running unended."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from delivery.cli.main import _stop_on_signals
from delivery.processes import holding_signals, register


@pytest.fixture
def delivery_signal_handlers() -> Iterator[None]:
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    _stop_on_signals()  # as `delivery` installs them
    yield
    for number, handler in before.items():
        signal.signal(number, handler)


@pytest.mark.usefixtures("delivery_signal_handlers")
def test_a_ctrl_c_while_a_group_starts_is_raised_once_it_is_registered_and_ends_it() -> None:
    reached: list[str] = []
    process: subprocess.Popen[bytes] | None = None
    with pytest.raises(KeyboardInterrupt), holding_signals():
        process = subprocess.Popen(["sleep", "30"], start_new_session=True)
        os.kill(os.getpid(), signal.SIGINT)  # between the start and the registration
        reached.append("registered")
        register(process.pid)
    assert reached == ["registered"]  # held: not raised before the group was registered
    assert process is not None
    assert process.wait(timeout=10) == -signal.SIGKILL  # the handler's end_all ended it
