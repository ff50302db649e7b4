"""The max segment tree behind first-fit node search."""

from __future__ import annotations

import random

from fluence_core.matcher.maxtree import MaxTree


def _first(values: list[int], threshold: int, start: int) -> int:
    return next((i for i in range(start, len(values)) if values[i] >= threshold), -1)


def _last(values: list[int], threshold: int, end: int) -> int:
    return next((i for i in range(min(end, len(values) - 1), -1, -1) if values[i] >= threshold), -1)


def test_first_and_last_at_least_agree_with_a_linear_scan() -> None:
    rng = random.Random(7)
    values = [rng.randint(-1, 64) for _ in range(300)]
    tree = MaxTree(values)
    for _ in range(2000):
        position = rng.randrange(len(values))
        values[position] = rng.randint(-1, 64)
        tree.set(position, values[position])
        threshold, cursor = rng.randint(0, 65), rng.randrange(len(values))
        assert tree.first_at_least(threshold, cursor) == _first(values, threshold, cursor)
        assert tree.last_at_least(threshold, cursor) == _last(values, threshold, cursor)


def test_append_grows_past_a_power_of_two() -> None:
    tree = MaxTree([1, 2, 3, 4])
    assert tree.append(9) == 4
    assert len(tree) == 5
    assert tree.first_at_least(5) == 4
    assert tree.last_at_least(3) == 4
    assert tree.get(2) == 3


def test_no_position_qualifies_returns_minus_one() -> None:
    tree = MaxTree([0, -1, 2])
    assert tree.first_at_least(3) == -1
    assert tree.last_at_least(3) == -1
    assert tree.first_at_least(0, 3) == -1
