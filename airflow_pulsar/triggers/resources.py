"""ClosesOnCleanup: the clients a trigger's ``run`` opens are closed however the trigger ends."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from functools import cached_property

log = logging.getLogger(__name__)


class ClosesOnCleanup:
    """
    For triggers whose ``run`` opens Pulsar clients or admin sessions.

    ``run`` wraps its body in ``async with self.resources:`` and registers what it opens there
    (``push_async_callback(client.close)``, ``enter_async_context(admin)``), so that returning or
    failing closes them. The triggerer may also drop a trigger while ``run`` is suspended at an
    event it yielded (the task was cleared or timed out, the triggerer is stopping); ``run`` then
    does not resume, and the triggerer's call to :meth:`cleanup` closes what is still open.
    Closing twice is harmless: each resource is closed once.
    """

    @cached_property
    def resources(self) -> AsyncExitStack:
        """What ``run`` opened and has not closed yet."""
        return AsyncExitStack()

    async def cleanup(self) -> None:
        """Close what ``run`` left open; the triggerer calls this however the trigger ended."""
        try:
            await self.resources.aclose()
        except Exception:
            # The triggerer ignores what cleanup raises: say it here.
            log.warning("Closing the Pulsar clients of %s failed", type(self).__name__, exc_info=True)
