"""The shape of a hostile-input case: an input and the error that must name what is wrong."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Case:
    """One hostile input; ``expect`` is a regular expression the error message must match."""

    id: str
    input: Any
    expect: str


def cases(table: Iterable[Case]) -> list[Any]:
    """The table as pytest parameters named by case id (ids must be unique)."""
    table = list(table)
    ids = [case.id for case in table]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"case ids used twice: {duplicates}"
    return [pytest.param(case, id=case.id) for case in table]
