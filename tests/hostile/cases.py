"""The shape of a hostile-input case: an input and the error that must name what is wrong."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"b{i}: &b{i} [" + ", ".join([f"*{'a' if i == 0 else f'b{i - 1}'}"] * 10) + "]\n"
    for i in range(8)
)
"""A billion-laughs document: nine levels of ten aliases each, 10**9 nodes once expanded."""


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


def run_fluence(*args: str) -> tuple[int, str, BaseException | None]:
    """``fluence ARGS`` in process: exit code, everything it printed (one line), its exception."""
    from typer.testing import CliRunner

    from fluence_core.cli import app, load_plugin_commands

    load_plugin_commands(app)
    result = CliRunner().invoke(app, list(args), terminal_width=400)
    return result.exit_code, " ".join(result.output.split()), result.exception
