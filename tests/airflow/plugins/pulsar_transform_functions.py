"""Transform functions the transform operator's test DAGs name by dotted path (Airflow's plugins folder)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def upper(message: Any, hold_at: str = "", marker: str = "", fail_at: str = "") -> str:
    """The message's value in upper case. At the value ``hold_at``, the first time (no ``marker``
    file yet), it writes ``marker`` (this process's pid) and blocks until the process is killed:
    the earlier messages of its batch are then published and acknowledged in the open transaction.
    At the value ``fail_at`` it raises."""
    value = message.data().decode()
    if value == fail_at:
        raise ValueError(f"cannot transform {value}")
    if hold_at and value == hold_at and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        while True:
            time.sleep(1)
    return value.upper()


def upper_batch(messages: list[Any], suffix: str = "") -> list[tuple[str, str]]:
    """Each value of the batch in upper case with ``suffix``, keyed by its input's key."""
    return [(message.partition_key(), message.data().decode().upper() + suffix) for message in messages]
