"""FluxionMatcher.plan_reservation: Fluxion's own match_allocate_orelse_reserve says when a
waiting group's room frees, from how long each hold still lasts (skipped without
``FLUENCE_FLUXION_LIB``)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from fluence_core.api import NodeInfo, PodRequest, ResourceGraph
from fluence_core.testing import compute_jobspec
from fluence_fluxion.matcher import FluxionMatcher, load_library

LIBRARY = os.environ.get("FLUENCE_FLUXION_LIB")
pytestmark = pytest.mark.skipif(
    not LIBRARY, reason="FLUENCE_FLUXION_LIB is not set (path to flux-sched's libreapi_cli.so)")


def _matcher() -> FluxionMatcher:
    assert LIBRARY is not None
    graph = ResourceGraph([NodeInfo(f"n{i}", 4, 4096) for i in range(3)])
    return FluxionMatcher(graph, "first", load_library(LIBRARY))


def _lasting(seconds: int, pods: list[PodRequest],
             constraint: dict[str, Any] | None = None) -> dict[str, Any]:
    jobspec = compute_jobspec(pods, constraint)
    jobspec["attributes"]["system"]["duration"] = seconds
    return jobspec


def _hold(node: str, seconds: int) -> dict[str, Any]:
    return _lasting(seconds, [PodRequest(f"on-{node}", cores=4)], {"hostlist": [node]})


GANG = [PodRequest(f"g{i}", cores=4) for i in range(2)]


def test_the_reservation_starts_when_the_holds_it_needs_end_first() -> None:
    matcher = _matcher()
    planned = matcher.plan_reservation(
        [_hold("n0", 500), _hold("n1", 100), _hold("n2", 300)], [_lasting(1, GANG)])
    assert planned is not None
    at, allocations = planned
    assert at == 300, "n1 frees at 100 and n2 at 300; n0 only at 500"
    assert sorted(s.node for a in allocations for s in a.nodes) == ["n1", "n2"]


def test_a_hold_without_an_end_leaves_nothing_to_reserve() -> None:
    matcher = _matcher()
    forever = 0
    assert matcher.plan_reservation(
        [_hold("n0", forever), _hold("n1", forever), _hold("n2", 100)],
        [_lasting(1, GANG)]) is None


def test_planning_holds_nothing_in_the_matcher() -> None:
    matcher = _matcher()
    matcher.plan_reservation([_hold("n0", 100)], [_lasting(1, GANG)])
    assert matcher.allocations() == {}
    assert matcher.match_allocate(compute_jobspec([PodRequest("p", cores=4)] * 3)) is not None
