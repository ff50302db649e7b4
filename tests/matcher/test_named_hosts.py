"""A jobspec naming a few hosts at its top is matched on those hosts alone.

The shared pool leases one core of one node at a time with a jobspec naming that
node; the embedded matcher used to ask every node before it (O(nodes) a lease).
"""

from __future__ import annotations

from typing import Any

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.constraints import FEW_HOSTS, few_hosts
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.matcher.pooled import PooledMatcher, pooled
from fluence_core.models import NodeInfo, PodRequest


def _on(*hosts: str) -> dict[str, Any]:
    """A whole-core pod's jobspec held to ``hosts``, as the feasibility step writes it."""
    return compute_jobspec([PodRequest("p", cores=1)], {"hostlist": list(hosts)})


def test_few_hosts_reads_a_top_level_hostlist_alone_or_in_an_and() -> None:
    assert few_hosts({"hostlist": ["a", "b[1-2]"]}) == ["a", "b1", "b2"]
    assert few_hosts({"and": [{"properties": ["x"]}, {"hostlist": ["a"]}]}) == ["a"]
    assert few_hosts({"and": [{"properties": ["x"]}, {"and": [{"hostlist": ["a"]}]}]}) == ["a"]
    assert few_hosts({"or": [{"hostlist": ["a"]}]}) is None, "an or may accept other nodes"
    assert few_hosts({"not": [{"hostlist": ["a"]}]}) is None
    assert few_hosts({"hostlist": [f"n{i}" for i in range(FEW_HOSTS + 1)]}) is None


def test_a_jobspec_naming_one_node_asks_no_other_node() -> None:
    graph = ResourceGraph([NodeInfo(f"n{i}", 4, 4096) for i in range(50)])
    matcher = EmbeddedMatcher(graph)
    asked: list[str] = []
    fits = matcher._fits

    def counting(state: Any, shape: Any) -> bool:
        asked.append(state.vertex.name)
        return fits(state, shape)

    matcher._fits = counting  # type: ignore[method-assign]
    allocation = matcher.match_allocate(_on("n42"))
    assert allocation is not None and [s.node for s in allocation.nodes] == ["n42"]
    assert asked == ["n42"]


def test_a_jobspec_naming_only_unknown_nodes_fits_nowhere() -> None:
    matcher = EmbeddedMatcher(ResourceGraph([NodeInfo("n0", 4, 4096)]))
    assert matcher.match_allocate(_on("gone")) is None


def _pool(count: int) -> PooledMatcher:
    graph = ResourceGraph([NodeInfo(f"n{i:03d}", 4, 4096) for i in range(count)])
    return pooled(EmbeddedMatcher(graph), graph)


def _fractional(matcher: PooledMatcher, hosts: list[str]) -> str:
    pod = PodRequest("p", cores=0, millicores=100)
    allocation = matcher.match_allocate(compute_jobspec([pod], {"hostlist": hosts}))
    assert allocation is not None
    [share] = allocation.nodes
    return share.node


def _names(numbers: range) -> list[str]:
    return [f"n{i:03d}" for i in numbers]


def test_a_long_hostlist_finds_the_pools_first_listed_node_past_many_refused_ones() -> None:
    matcher = _pool(200)
    for name in _names(range(100)):  # n000..n099 each lease a core: 900m left as they are
        assert _fractional(matcher, [name]) == name
    assert len(_names(range(70, 170))) > FEW_HOSTS
    # 70 nodes with room come first and are refused; n070 has room as it is
    assert _fractional(matcher, _names(range(70, 170))) == "n070"
    # no listed node has room as it is: the first listed one that can lease a core
    assert _fractional(matcher, _names(range(100, 200))) == "n100"
