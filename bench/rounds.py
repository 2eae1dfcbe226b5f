"""Interleaved rounds: both clients run once per round, in turn, and each one's best round counts.

A short run on a shared machine is at the mercy of whatever else is scheduled meanwhile; taking
the best of a few rounds, interleaved so both clients see the same conditions, measures what
each client can do rather than the noise (as ``timeit`` takes the fastest repeat). Every round
is kept in the row, so the spread stays visible in ``latest.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DEFAULT_ROUNDS = 3


def best_of_rounds(rounds: int, runners: dict[str, Callable[[int], float]]) -> dict[str, Any]:
    """Call ``runner(round_index)`` of every client once per round (rates, higher is better).

    Returns each client's best rate under its own name, and every rate under ``runs``.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    runs: dict[str, list[float]] = {name: [] for name in runners}
    for round_index in range(rounds):
        for name, run in runners.items():
            runs[name].append(run(round_index))
    best: dict[str, Any] = {name: round(max(rates)) for name, rates in runs.items()}
    best["runs"] = {name: [round(rate) for rate in rates] for name, rates in runs.items()}
    return best
