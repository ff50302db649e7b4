"""fluence_core.scheduler.context: what a hook sees, read-only and typed."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from fluence_core.kube.fake import FakeCluster
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.scheduler import context
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.settings import Settings


def _context() -> SchedulingContext:
    graph = ResourceGraph()
    return SchedulingContext(settings=Settings(), graph=graph, matcher=EmbeddedMatcher(graph),
                             cluster=FakeCluster())


def test_a_hook_cannot_change_the_context() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _context().vetoed = ["n0"]  # type: ignore[misc]


def test_outside_a_cycle_no_node_counts_any_pod_and_nothing_is_planned_or_vetoed() -> None:
    ctx = _context()
    assert ctx.pods_on("n0") == 0
    assert dict(ctx.planned) == {} and list(ctx.vetoed) == []


def test_every_field_is_documented() -> None:
    source = inspect.getsource(context)
    for field in dataclasses.fields(SchedulingContext):
        declared = source.index(f"    {field.name}: ")
        assert source[declared:].split("\n", 2)[1].strip().startswith('"""'), field.name
