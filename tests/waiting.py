"""The tests' one wait: poll a condition the server or the fake reports until it holds.

It returns as soon as the condition holds, so a generous timeout costs nothing; only a failure
waits it whole, and then fails, rather than letting a slow machine weaken the test. Here, not
in conftest, so that `fake_upstream.py` (also used by bench/ and .ci/) can share it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# The first look comes soon; later ones space out (each 1.5 times the last, up to MAX_POLL_S), so
# that a condition read over HTTP or RPC costs the server little CPU through a long wait.
POLL_S = 0.01
MAX_POLL_S = 0.1


def wait_until(
    predicate: Callable[[], Any], timeout: float = 5.0, what: str | Callable[[], str] = "condition"
) -> Any:
    """Poll predicate() until it returns something true, and return that; after timeout
    seconds, fail with an AssertionError naming what (a string, or a callable for a message
    read at the failure, such as a server's stderr). predicate may itself raise to fail early
    (a server that exited will never get there)."""
    deadline, pause = time.monotonic() + timeout, POLL_S
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            named = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {named}")
        time.sleep(pause)  # sleep: the poll interval between two looks at the condition
        pause = min(pause * 1.5, MAX_POLL_S)
    return value
