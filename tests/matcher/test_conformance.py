"""The shared conformance suite, run against every available matcher."""

from __future__ import annotations

import pytest

from fluence_core.matcher.conformance import CASES, Case, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matcher_conforms(case: Case, matcher_factory) -> None:  # type: ignore[no-untyped-def]
    run_case(case, matcher_factory)
