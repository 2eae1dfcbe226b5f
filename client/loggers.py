"""Where the client's log records go: the ``logger=`` argument of ``Client``.

The client logs through the standard ``logging`` module under the ``airflow_pulsar.client``
logger. ``Client(logger=...)`` takes what the official client takes: a ``logging.Logger``, a
:class:`ConsoleLogger` (standard output) or a :class:`FileLogger`, each at a :class:`LoggerLevel`.
While such a client is open its records go to that logger instead of propagating to the root
logger. As in the official client, where the logger is process-wide, the most recently opened
client's logger wins.
"""

from __future__ import annotations

import enum
import logging
import sys
import threading

from .arguments import check_type, to_enum

__all__ = ["ConsoleLogger", "FileLogger", "LogRoute", "LoggerLevel"]

PACKAGE_LOGGER = logging.getLogger("airflow_pulsar.client")


class LoggerLevel(enum.IntEnum):
    """Log levels of :class:`ConsoleLogger` and :class:`FileLogger`, valued as ``pulsar.LoggerLevel``."""

    Debug = 0
    Info = 1
    Warn = 2
    Error = 3

    @property
    def python_level(self) -> int:
        """The ``logging`` level it stands for."""
        return (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)[self.value]


class ConsoleLogger:
    """Log to standard output at ``log_level`` and above."""

    def __init__(self, log_level: LoggerLevel = LoggerLevel.Info):
        self.log_level = to_enum(LoggerLevel, log_level, "log_level")


class FileLogger:
    """Log to the file ``log_file`` (appended to) at ``log_level`` and above."""

    def __init__(self, log_level: LoggerLevel, log_file: str):
        self.log_level = to_enum(LoggerLevel, log_level, "log_level")
        check_type(str, log_file, "log_file")
        self.log_file = log_file


class _Forward(logging.Handler):
    """Hands the package's records to another logger, which applies its own level and handlers."""

    def __init__(self, target: logging.Logger):
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


class LogRoute:
    """Routes the client package's records to one logger until :meth:`close`.

    Routes stack: closing the newest brings back the one before it, closing the last restores the
    package logger as it was.
    """

    _lock = threading.Lock()
    _active: list[LogRoute] = []
    _saved: tuple[int, bool] | None = None

    def __init__(self, logger: logging.Logger | ConsoleLogger | FileLogger):
        self._owned: logging.Handler | None = None
        self._handler = _Forward(self._target(logger))
        with LogRoute._lock:
            if not LogRoute._active:
                LogRoute._saved = (PACKAGE_LOGGER.level, PACKAGE_LOGGER.propagate)
            LogRoute._active.append(self)
            self._install_newest()

    def _target(self, logger: logging.Logger | ConsoleLogger | FileLogger) -> logging.Logger:
        if isinstance(logger, logging.Logger):
            return logger
        handler: logging.Handler
        if isinstance(logger, ConsoleLogger):
            handler = logging.StreamHandler(sys.stdout)
        elif isinstance(logger, FileLogger):
            handler = self._owned = logging.FileHandler(logger.log_file)
        else:
            raise ValueError("Logger is expected to be either None, logging.Logger, ConsoleLogger or FileLogger")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(name)s | %(message)s"))
        # A logger outside the package, so its records are not routed back to it.
        target = logging.Logger(f"pulsar-client-{id(self)}", logger.log_level.python_level)
        target.addHandler(handler)
        return target

    @staticmethod
    def _install_newest() -> None:
        for route in LogRoute._active:
            PACKAGE_LOGGER.removeHandler(route._handler)
        newest = LogRoute._active[-1]._handler
        PACKAGE_LOGGER.addHandler(newest)
        # Records below the package's level are never made: let the target's level decide.
        PACKAGE_LOGGER.setLevel(newest.target.getEffectiveLevel())
        PACKAGE_LOGGER.propagate = False

    def close(self) -> None:
        """Stop routing here (idempotent)."""
        with LogRoute._lock:
            if self not in LogRoute._active:
                return
            PACKAGE_LOGGER.removeHandler(self._handler)
            LogRoute._active.remove(self)
            if LogRoute._active:
                self._install_newest()
            elif LogRoute._saved is not None:
                PACKAGE_LOGGER.setLevel(LogRoute._saved[0])
                PACKAGE_LOGGER.propagate = LogRoute._saved[1]
        if self._owned is not None:
            self._owned.close()
