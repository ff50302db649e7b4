"""fluence_core.scheduler.tenants: namespaces take turns within a priority."""

from __future__ import annotations

from collections.abc import Callable

from fluence_core.scheduler.groups import PendingGroup
from fluence_core.scheduler.tenants import in_turns
from tests.scheduler.conftest import Harness, node, pod


def _group(key: str, priority: int = 0) -> PendingGroup:
    namespace = key.split("/", 1)[0]
    return PendingGroup(key, namespace, [], priority=priority)


def _keys(groups: list[PendingGroup]) -> list[str]:
    return [group.key for group in groups]


def test_a_namespace_with_one_group_is_taken_second_behind_a_burst() -> None:
    burst = [_group(f"a/p{i}") for i in range(3)]
    assert _keys(in_turns([*burst, _group("b/q")])) == ["a/p0", "b/q", "a/p1", "a/p2"]


def test_each_namespace_keeps_its_own_order() -> None:
    groups = [_group(k) for k in ("b/q0", "a/p0", "a/p1", "a/p2", "b/q1")]
    assert _keys(in_turns(groups)) == ["b/q0", "a/p0", "a/p1", "b/q1", "a/p2"]


def test_a_higher_priority_goes_first_whatever_the_turns() -> None:
    groups = [_group("a/high0", 10), _group("a/high1", 10), _group("b/low", 0)]
    assert _keys(in_turns(groups)) == ["a/high0", "a/high1", "b/low"]


def test_turns_are_counted_within_each_priority() -> None:
    groups = [_group("a/high", 10), _group("a/low0"), _group("a/low1"), _group("b/low")]
    assert _keys(in_turns(groups)) == ["a/high", "a/low0", "b/low", "a/low1"]


def test_a_namespace_alone_is_taken_in_its_own_order() -> None:
    groups = [_group(f"a/p{i}") for i in range(4)]
    assert _keys(in_turns(groups)) == _keys(groups)


def test_the_cycle_tries_another_namespaces_pod_second_behind_a_burst(
        harness_factory: Callable[..., Harness]) -> None:
    h = harness_factory(node("n0", cpu=2))
    for namespace in ("a", "b"):
        h.cluster.create("namespaces", {"metadata": {"name": namespace}})
    for i in range(5):
        h.cluster.create("pods", pod(f"big{i}", "4", namespace="a"), "a")
    h.cluster.create("pods", pod("small", "1", namespace="b"), "b")
    results = h.cycle()
    assert [r.group for r in results][:2] == ["a/big0", "b/small"]
    assert results[1].placed == {"b/small": "n0"}
