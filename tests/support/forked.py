"""Run a function in a child made by a plain ``os.fork()`` and get back what it returned.

The child reports through a pipe (JSON), or the traceback of what it raised; it never returns
into pytest (``os._exit``), and one that hangs is killed after ``timeout`` seconds, which fails
the test with the hang named rather than stopping the suite.
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any


def run_forked(function: Callable[[], Any], timeout: float = 60) -> Any:
    """``function()`` in a forked child: its JSON-able result, or AssertionError with the child's failure."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            try:
                report = {"result": function()}
                status = 0
            except BaseException:
                report = {"error": traceback.format_exc()}
            with os.fdopen(write_end, "w") as pipe:
                json.dump(report, pipe)
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + timeout
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            raise AssertionError(f"the forked child hung for {timeout:g} s and was killed")
        time.sleep(0.05)
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    report = json.loads(text) if text else {"error": "the child exited without a report"}
    if "error" in report:
        raise AssertionError(f"the forked child failed:\n{report['error']}")
    return report["result"]
