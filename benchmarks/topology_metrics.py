"""How well a placement keeps gangs together: the pure figures ``bench_topology.py`` reports.

Kept apart from the benchmark (which needs a real API server) so that a unit test can
check them: ``tests/test_bench_topology_metrics.py``.

* :func:`rack_span`: racks a gang used over the fewest racks it could have used;
  1.0 is perfect.
* :func:`lowest_common_level`: the narrowest level one of whose domains holds the whole
  gang (``node``, a topology level, or ``cluster``).
* :func:`whole_free_racks`: racks none of whose nodes holds any pod, the room left for
  the next big gang.
* :func:`whole_slices`: of a sliced gang's slices (consecutive pods, ``size`` at a time),
  those whose pods all sit in one rack.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

NODE = "node"
CLUSTER = "cluster"


def min_racks(pods: int, pods_per_rack: int) -> int:
    """The fewest racks ``pods`` alike pods fit in when an empty rack holds ``pods_per_rack``."""
    if pods_per_rack < 1:
        raise ValueError(f"pods_per_rack must be at least 1, not {pods_per_rack}")
    return max(1, math.ceil(pods / pods_per_rack))


def rack_span(nodes: Sequence[str], rack_of: Mapping[str, str], pods_per_rack: int) -> float:
    """Racks used by a gang whose pods went to ``nodes`` (one entry per pod), divided by
    :func:`min_racks`: 1.0 when the gang used as few racks as it could."""
    if not nodes:
        raise ValueError("a gang with no placed pod has no rack-span")
    used = {rack_of[n] for n in nodes}
    return len(used) / min_racks(len(nodes), pods_per_rack)


def lowest_common_level(nodes: Iterable[str], labels_of: Mapping[str, Mapping[str, str]],
                        levels: Sequence[tuple[str, str]]) -> str:
    """The narrowest level with one domain holding every node in ``nodes``.

    ``levels`` are ``(label, name)`` pairs, widest first. A domain is the path of label
    values from the widest level down (rack ``r1`` in two zones is two racks), as Fluence
    names domains. One node is :data:`NODE`; no common domain even at the widest level is
    :data:`CLUSTER`. A node lacking a label shares no domain of that level with anyone.
    """
    distinct = sorted(set(nodes))
    if not distinct:
        raise ValueError("no nodes: no common level")
    if len(distinct) == 1:
        return NODE
    found = CLUSTER
    for depth, (_, name) in enumerate(levels):
        paths = set()
        for node in distinct:
            values = tuple(labels_of[node].get(label) for label, _ in levels[:depth + 1])
            paths.add(values if None not in values else (node,))
        if len(paths) == 1:
            found = name
        else:
            break
    return found


def whole_free_racks(used_nodes: Collection[str], racks: Mapping[str, Collection[str]]) -> int:
    """How many racks (rack -> its nodes) have no node in ``used_nodes``."""
    return sum(1 for members in racks.values() if not any(n in used_nodes for n in members))


def whole_slices(nodes: Sequence[str], rack_of: Mapping[str, str], size: int
                 ) -> tuple[int, int]:
    """(slices inside one rack, slices) of a gang whose pods, in index order, sit on
    ``nodes``, cut into slices of ``size`` consecutive pods."""
    if size < 1:
        raise ValueError(f"size must be at least 1, not {size}")
    cuts = [nodes[i: i + size] for i in range(0, len(nodes), size)]
    return sum(len({rack_of[n] for n in cut}) == 1 for cut in cuts), len(cuts)
