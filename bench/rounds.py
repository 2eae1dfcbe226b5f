"""Interleaved rounds: both clients run once per round, in turn, and each one's best round counts.

A short run on a shared machine is at the mercy of whatever else is scheduled meanwhile; taking
the best of a few rounds, interleaved so both clients see the same conditions, measures what
each client can do rather than the noise (as ``timeit`` takes the fastest repeat). Every round
is kept in the row, so the spread stays visible in ``latest.json``.

Who runs first moves on by one each round, so that no client always meets the broker just after
the same other one: a JVM the other has warmed up, a backlog the other has just read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DEFAULT_ROUNDS = 3


def in_turn(names: list[str], round_index: int) -> list[str]:
    """``names`` in the order they run in round ``round_index``: the first moves on by one each round."""
    shift = round_index % len(names) if names else 0
    return names[shift:] + names[:shift]


def best_of_rounds(rounds: int, runners: dict[str, Callable[[int], float]]) -> dict[str, Any]:
    """Call ``runner(round_index)`` of every client once per round (rates, higher is better).

    Returns each client's best rate under its own name, and every rate under ``runs``.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    runs: dict[str, list[float]] = {name: [] for name in runners}
    for round_index in range(rounds):
        for name in in_turn(list(runners), round_index):
            runs[name].append(runners[name](round_index))
    best: dict[str, Any] = {name: round(max(rates)) for name, rates in runs.items()}
    best["runs"] = {name: [round(rate) for rate in rates] for name, rates in runs.items()}
    return best
