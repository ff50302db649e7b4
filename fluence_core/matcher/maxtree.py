"""A max segment tree over node positions: the first node with at least k free cores.

First-fit over a thousand nodes would otherwise mean a Python loop per match;
with the tree, finding a candidate is a walk of ``log2(n)`` levels, and an
allocation updates one leaf and its ancestors.
"""

from __future__ import annotations


class MaxTree:
    """Values per position (``-1`` = unusable) with first/last-at-least queries."""

    def __init__(self, values: list[int]) -> None:
        size = 1
        while size < max(1, len(values)):
            size *= 2
        self._size = size
        self._length = len(values)
        self._tree = [-1] * (2 * size)
        self._tree[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            left, right = self._tree[2 * i], self._tree[2 * i + 1]
            self._tree[i] = left if left > right else right

    def __len__(self) -> int:
        return self._length

    def get(self, position: int) -> int:
        return self._tree[self._size + position]

    def set(self, position: int, value: int) -> None:
        tree = self._tree
        i = self._size + position
        tree[i] = value
        i //= 2
        while i:
            left, right = tree[2 * i], tree[2 * i + 1]
            best = left if left > right else right
            if tree[i] == best:
                break
            tree[i] = best
            i //= 2

    def append(self, value: int) -> int:
        """Add a position at the end, growing the tree when full; returns the position."""
        if self._length == self._size:
            values = self._tree[self._size : self._size + self._length]
            self.__init__(values + [value])  # type: ignore[misc]
        else:
            self._length += 1
            self.set(self._length - 1, value)
        return self._length - 1

    def first_at_least(self, threshold: int, start: int = 0) -> int:
        """The smallest position >= start whose value >= threshold, or -1."""
        tree, size = self._tree, self._size
        if start >= self._length or tree[1] < threshold:
            return -1
        i = size + start
        if tree[i] >= threshold:
            return start
        # climb until a right sibling subtree holds a candidate
        while True:
            if i & 1 == 0 and tree[i + 1] >= threshold:
                i += 1
                break
            i //= 2
            if i <= 1:
                return -1
        while i < size:
            i = 2 * i if tree[2 * i] >= threshold else 2 * i + 1
        position = i - size
        return position if position < self._length else -1

    def last_at_least(self, threshold: int, end: int | None = None) -> int:
        """The largest position <= end whose value >= threshold, or -1."""
        tree, size = self._tree, self._size
        end = self._length - 1 if end is None else min(end, self._length - 1)
        if end < 0 or tree[1] < threshold:
            return -1
        i = size + end
        if tree[i] >= threshold:
            return end
        while True:
            if i & 1 == 1 and tree[i - 1] >= threshold:
                i -= 1
                break
            i //= 2
            if i <= 1:
                return -1
        while i < size:
            i = 2 * i + 1 if tree[2 * i + 1] >= threshold else 2 * i
        return i - size
