"""The README's test command draws the same property-test examples on every run.

The root ``conftest.py`` loads the ``repeatable`` profile unless a run asks for
another with ``--hypothesis-profile``; this pins that choice, so a failing
example seen on one machine fails again for whoever reruns the command.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SEEN: list[int] = []


def test_the_default_profile_is_derandomized_with_no_database(
        pytestconfig: pytest.Config) -> None:
    chosen = pytestconfig.getoption("hypothesis_profile", None)
    if chosen not in (None, "repeatable"):
        pytest.skip(f"this run chose --hypothesis-profile={chosen}")
    assert settings.default.derandomize is True
    assert settings.default.database is None


@given(st.integers())
def _draws(value: int) -> None:
    SEEN.append(value)


def test_two_runs_of_one_property_draw_the_same_examples(pytestconfig: pytest.Config) -> None:
    chosen = pytestconfig.getoption("hypothesis_profile", None)
    if chosen not in (None, "repeatable"):
        pytest.skip(f"this run chose --hypothesis-profile={chosen}")
    _draws()
    first = list(SEEN)
    SEEN.clear()
    _draws()
    assert SEEN == first and len(first) > 1
