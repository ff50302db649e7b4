"""One conformance suite every matcher must pass, embedded or Fluxion.

Each case builds a graph, then runs a sequence of steps (match a group,
cancel, restore into a fresh matcher, mark a node down, ask satisfiability)
with the expected outcome of each. Where two matchers may legitimately pick
different vertices, the expectations name properties (how many nodes, which
node set, which backend), not exact ids.

Plugin authors run it against their own matcher with :func:`run_case`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.jobspec import group_jobspecs, is_compute
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.base import Allocation, Matcher, NodeShare
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.resource_config import parse_resource_config
from fluence_core.topology import NONE as NO_CONSTRAINT
from fluence_core.topology import Constraint, Level, SliceLayer

MatcherFactory = Callable[[ResourceGraph, str], Matcher]

TWO_BACKENDS = """
attributes:
  aws: {provider: braket, region: us-east-1}
resources:
  - type: qpu
    name: cepheus
    attributes: aws
    with: [{type: qubit, count: 4}]
  - type: qpu
    name: ankaa
    attributes: {provider: braket, region: us-west-1}
    with: [{type: qubit, count: 4}]
"""


def pods(*cores: int, memory: int = 0, gpus: int = 0, virtual: dict[str, int] | None = None,
         requires: dict[str, str] | None = None, prefix: str = "p") -> tuple[PodRequest, ...]:
    """Pods with the given core counts and shared other requests."""
    return tuple(
        PodRequest(f"{prefix}{i}", cores=c, memory_mib=memory, gpus=gpus,
                   virtual=dict(virtual or {}), requires=dict(requires or {}))
        for i, c in enumerate(cores)
    )


@dataclass
class Step:
    """One action and what must follow from it."""

    action: str
    """``match``, ``cancel``, ``restart`` (fresh matcher + restore), ``down``, ``up``,
    ``satisfiable``."""
    label: str = ""
    group: tuple[PodRequest, ...] = ()
    fits: bool = True
    node: str = ""
    exclude: Sequence[str] = ()
    node_count: int | None = None
    on_nodes: set[str] | None = None
    backend: str | None = None
    virtual_type: str | None = None
    cores_on: dict[str, int] | None = None
    memory_on: dict[str, int] | None = None
    gpus_on: dict[str, int] | None = None
    topology: Constraint = NO_CONSTRAINT
    """What the group asks of the case's topology levels (slices too)."""
    within: str | None = None
    """A node label the whole group's nodes must share one value of."""
    slices_within: str | None = None
    """A node label each slice's nodes must share one value of."""


@dataclass
class Case:
    name: str
    nodes: list[NodeInfo]
    steps: list[Step]
    resources: str = ""
    policy: str = "first"
    levels: tuple[Level, ...] = ()
    """The graph's topology levels, widest first (none: flat)."""


@dataclass
class _Run:
    graph: ResourceGraph
    matcher: Matcher
    held: dict[str, GroupMatch] = field(default_factory=dict)
    last_jobid: int = 0


def _nodes(count: int, cores: int = 4, memory: int = 4096, gpus: int = 0) -> list[NodeInfo]:
    return [NodeInfo(f"n{i}", cores, memory, gpus) for i in range(count)]


_BLOCK = Level("example.com/block", "block")
_RACK = Level(names.RACK_LABEL, "rack")
_ISLAND = "example.com/island"


def _racks(*sizes: int, **labels: str) -> list[NodeInfo]:
    """Racks r0, r1, ... of ``sizes`` 4-core nodes in block x; ``labels`` on every node."""
    return [NodeInfo(f"r{r}-{n}", 4, 4096, 0, labels={
        _BLOCK.label: "x", _RACK.label: f"r{r}", **labels})
        for r, size in enumerate(sizes) for n in range(size)]


def _sliced(size: int) -> Constraint:
    return Constraint(required=(_BLOCK.label,), slices=(SliceLayer(_RACK.label, size),))


CASES: list[Case] = [
    Case(
        "slices stay whole inside racks of one block",
        _racks(3, 2),
        [
            Step("match", "sliced", pods(4, 4, 4, 4), topology=_sliced(2),
                 slices_within=_RACK.label, within=_BLOCK.label, node_count=4),
            Step("match", "last", pods(4), on_nodes={"r0-0", "r0-1", "r0-2"}),
            Step("match", "none-left", pods(4), fits=False),
        ],
        levels=(_BLOCK, _RACK),
    ),
    Case(
        "slices no rack can hold are not placed, in part or whole",
        _racks(1, 1, 1, 1),
        [
            Step("match", "sliced", pods(4, 4, 4, 4), topology=_sliced(2), fits=False),
            Step("match", "uncut", pods(4, 4, 4), topology=_sliced(2), fits=False),
            Step("match", "all-free", pods(4, 4, 4, 4), node_count=4),
        ],
        levels=(_BLOCK, _RACK),
    ),
    Case(
        "a key that is no level keeps the group inside one of its domains",
        [NodeInfo(f"i{i}-{n}", 4, 4096, 0, labels={_ISLAND: f"i{i}"})
         for i, size in enumerate((2, 3)) for n in range(size)],
        [
            Step("match", "three", pods(4, 4, 4), topology=Constraint(required=(_ISLAND,)),
                 within=_ISLAND, on_nodes={"i1-0", "i1-1", "i1-2"}),
            Step("match", "no-island", pods(4, 4, 4), topology=Constraint(required=(_ISLAND,)),
                 fits=False),
        ],
    ),
    Case(
        "gang fits only all together",
        _nodes(2),
        [
            Step("match", "too-big", pods(3, 3, 3), fits=False),
            Step("match", "two", pods(3, 3), node_count=2),
            Step("match", "rest", pods(1, 1), node_count=2, cores_on={"n0": 1, "n1": 1}),
        ],
    ),
    Case(
        "heterogeneous slots share nodes within capacity",
        _nodes(2),
        [
            Step("match", "mixed", pods(3, 1, 4), cores_on={"n0": 4, "n1": 4}),
            Step("match", "none-left", pods(1), fits=False),
        ],
        policy="lonode",
    ),
    Case(
        "mixed shapes fit where one shape after another would not",
        [NodeInfo("n0", 2, 4096, 2), NodeInfo("n1", 2, 1024, 2)],
        [
            Step("match", "mixed", pods(1, 1) + pods(1, memory=3000, prefix="big")),
            Step("match", "last-core", pods(1)),
            Step("match", "none-left", pods(1), fits=False),
        ],
    ),
    Case(
        "memory takes the whole chunks that cover it",
        _nodes(1, cores=4, memory=4096),
        [
            Step("match", "a", pods(1, memory=1500), memory_on={"n0": 2048}),
            Step("match", "b", pods(1, memory=3000), fits=False),
            Step("match", "c", pods(1, memory=2048), memory_on={"n0": 2048}),
        ],
    ),
    Case(
        "gpu slots land where the gpus are",
        [NodeInfo("n0", 4, 4096, 0), NodeInfo("n1", 4, 4096, 2)],
        [
            Step("match", "g1", pods(1, gpus=1), on_nodes={"n1"}, gpus_on={"n1": 1}),
            Step("match", "g2", pods(1, gpus=1), on_nodes={"n1"}),
            Step("match", "g3", pods(1, gpus=1), fits=False),
            Step("match", "cpu", pods(1), on_nodes={"n0"}),
        ],
        policy="lonode",
    ),
    Case(
        "hostlist exclusion keeps a group off named nodes",
        _nodes(3),
        [
            Step("match", "x", pods(4), exclude=["n0", "n1"], on_nodes={"n2"}),
            Step("match", "y", pods(4), exclude=["n0", "n1"], fits=False),
        ],
    ),
    Case(
        "virtual resources are chosen by class",
        _nodes(1),
        [
            Step("match", "q1", pods(1, virtual={"qpu": 1}), virtual_type="qpu"),
            Step("match", "q2", pods(1, virtual={"qpu": 1}), virtual_type="qpu"),
            Step("match", "q3", pods(1, virtual={"qpu": 1}), fits=False),
        ],
        resources=TWO_BACKENDS,
    ),
    Case(
        "virtual resources are pinned by attribute",
        _nodes(1),
        [
            Step(
                "match",
                "west",
                pods(1, virtual={"qpu": 1}, requires={"region": "us-west-1"}),
                backend="ankaa",
            ),
            Step(
                "match",
                "west-again",
                pods(1, virtual={"qpu": 1}, requires={"region": "us-west-1"}),
                fits=False,
            ),
            Step(
                "match",
                "by-backend",
                pods(1, virtual={"qpu": 1}, requires={"backend": "cepheus"}),
                backend="cepheus",
            ),
        ],
        resources=TWO_BACKENDS,
    ),
    Case(
        "depletion, cancel, refit",
        _nodes(2),
        [
            Step("match", "a", pods(4, 4)),
            Step("match", "b", pods(4), fits=False),
            Step("cancel", "a"),
            Step("match", "c", pods(4, 4), node_count=2),
        ],
    ),
    Case(
        "restore after a restart never double-allocates",
        _nodes(2),
        [
            Step("match", "a", pods(4), on_nodes={"n0"}),
            Step("restart"),
            Step("match", "b", pods(4), on_nodes={"n1"}),
            Step("match", "c", pods(1), fits=False),
            Step("cancel", "a"),
            Step("match", "d", pods(4), on_nodes={"n0"}),
        ],
        policy="lonode",
    ),
    Case(
        "restore holds virtual resources too",
        _nodes(1),
        [
            Step(
                "match",
                "q",
                pods(1, virtual={"qpu": 1}, requires={"backend": "ankaa"}),
                backend="ankaa",
            ),
            Step("restart"),
            Step(
                "match",
                "again",
                pods(1, virtual={"qpu": 1}, requires={"backend": "ankaa"}),
                fits=False,
            ),
        ],
        resources=TWO_BACKENDS,
    ),
    Case(
        "down nodes take no work until up again",
        _nodes(2),
        [
            Step("down", node="n0"),
            Step("match", "a", pods(4), on_nodes={"n1"}),
            Step("match", "b", pods(4), fits=False),
            Step("up", node="n0"),
            Step("match", "c", pods(4), on_nodes={"n0"}),
        ],
        policy="lonode",
    ),
    Case(
        "satisfiable ignores what is held, not what exists",
        _nodes(2),
        [
            Step("match", "a", pods(4, 4)),
            Step("satisfiable", "busy", pods(4, 4), fits=True),
            Step("satisfiable", "never", pods(4, 4, 4), fits=False),
            Step("satisfiable", "too-wide", pods(5), fits=False),
        ],
    ),
    Case(
        "policy lonode packs nodes from the lowest rank",
        _nodes(3),
        [
            Step("match", "a", pods(2), on_nodes={"n0"}),
            Step("match", "b", pods(2), on_nodes={"n0"}),
            Step("match", "c", pods(1), on_nodes={"n1"}),
        ],
        policy="lonode",
    ),
    Case(
        "policy hinode packs nodes from the highest rank",
        _nodes(3),
        [
            Step("match", "a", pods(2), on_nodes={"n2"}),
            Step("match", "b", pods(1), on_nodes={"n2"}),
            Step("match", "c", pods(2), on_nodes={"n1"}),
        ],
        policy="hinode",
    ),
    Case(
        "policy low prefers the lowest free core id, spreading",
        _nodes(3),
        [
            Step("match", "a", pods(4), on_nodes={"n0"}),
            Step("match", "b", pods(1), on_nodes={"n1"}),
            Step("match", "c", pods(1), on_nodes={"n2"}),
            Step("match", "d", pods(2), on_nodes={"n1"}),
        ],
        policy="low",
    ),
    Case(
        "policy high prefers the highest free core id, spreading",
        _nodes(3),
        [
            Step("match", "a", pods(4), on_nodes={"n0"}),
            Step("match", "b", pods(1), on_nodes={"n1"}),
            Step("match", "c", pods(1), on_nodes={"n2"}),
            Step("match", "d", pods(2), on_nodes={"n1"}),
        ],
        policy="high",
    ),
    Case(
        "policy first fills the cluster without overlap",
        _nodes(3),
        [
            Step("match", "a", pods(4)),
            Step("match", "b", pods(2, 2, 2, 2), node_count=2),
            Step("match", "c", pods(1), fits=False),
        ],
    ),
    Case(
        "job ids are never reused",
        _nodes(1),
        [
            Step("match", "a", pods(1)),
            Step("cancel", "a"),
            Step("match", "b", pods(1)),
        ],
    ),
]


def build_graph(case: Case) -> ResourceGraph:
    config = parse_resource_config(case.resources, f"<{case.name}>") if case.resources else None
    return ResourceGraph(case.nodes, config, levels=case.levels)


def run_case(case: Case, factory: MatcherFactory) -> None:
    """Run every step of ``case`` against a matcher made by ``factory``; AssertionError on a miss.
    """
    graph = build_graph(case)
    run = _Run(graph, factory(graph, case.policy))
    for index, step in enumerate(case.steps):
        where = f"{case.name}: step {index} ({step.action} {step.label})"
        _STEP[step.action](run, step, where, factory, case)


def _match(run: _Run, step: Step, where: str, factory: MatcherFactory, case: Case) -> None:
    group = Group(step.label, step.group, topology=step.topology)
    result = match_group(group, run.graph, run.matcher, exclude_nodes=list(step.exclude))
    fitted = isinstance(result, GroupMatch)
    assert fitted == step.fits, f"{where}: expected fits={step.fits}, got {result}"
    if not isinstance(result, GroupMatch):
        return
    run.held[step.label] = result
    jobids = result.jobids
    assert min(jobids) > run.last_jobid, f"{where}: job ids {jobids} reuse one <= {run.last_jobid}"
    run.last_jobid = max(jobids)
    _check_compute(_merged_compute(result), step, where)
    for pod in group.pods:
        placement = result.placements[pod.key]
        assert placement.node is not None, f"{where}: pod {pod.key} has no node"
        if step.on_nodes is not None:
            assert placement.node in step.on_nodes, (
                f"{where}: {pod.key} on {placement.node}, expected {step.on_nodes}"
            )
        if pod.virtual:
            assert placement.backend, f"{where}: pod {pod.key} got no backend"
            if step.backend is not None:
                assert placement.backend == step.backend, (
                    f"{where}: backend {placement.backend} != {step.backend}"
                )
    _check_domains(run.graph, result, step, where)
    for kind, allocation in result.allocations.items():
        if is_compute(kind):
            continue
        for share in allocation.virtual:
            vertex = next(v for v in run.graph.virtual if v.path == share.path)
            assert f"class={kind}" in vertex.properties, (
                f"{where}: {share.path} cannot serve {kind}"
            )
            assert "virtual=true" in vertex.properties
            if step.virtual_type is not None:
                assert kind == step.virtual_type


def _check_domains(graph: ResourceGraph, result: GroupMatch, step: Step, where: str) -> None:
    """The group's nodes, and each slice's, share one value of the labels the step names."""
    def values(pods: Sequence[str], label: str) -> set[str | None]:
        return {graph.node(node).labels.get(label) for node in
                (result.placements[pod].node for pod in pods) if node is not None}

    if step.within is not None:
        found = values(list(result.placements), step.within)
        assert len(found) == 1 and None not in found, (
            f"{where}: the group spans {sorted(map(str, found))} of {step.within}")
    if step.slices_within is not None:
        assert result.slices, f"{where}: no slices in the match"
        for placed in result.slices:
            found = values(placed.pods, step.slices_within)
            assert len(found) == 1 and None not in found, (
                f"{where}: slice {placed.index} spans {sorted(map(str, found))} of "
                f"{step.slices_within}")


def _merged_compute(result: GroupMatch) -> list[NodeShare]:
    """Every compute allocation's node shares, merged per node."""
    merged: dict[str, NodeShare] = {}
    for kind, allocation in result.allocations.items():
        if not is_compute(kind):
            continue
        for share in allocation.nodes:
            if share.node in merged:
                old = merged[share.node]
                share = NodeShare(share.node, old.cores + share.cores, old.gpus + share.gpus,
                                  old.memory + share.memory, old.memory_mib + share.memory_mib)
            merged[share.node] = share
    return list(merged.values())


def _check_compute(shares: list[NodeShare], step: Step, where: str) -> None:
    assert shares, f"{where}: no compute allocation"
    nodes = {share.node: share for share in shares}
    for share in shares:
        assert len(set(share.cores)) == len(share.cores), (
            f"{where}: duplicate core ids on {share.node}"
        )
    if step.node_count is not None:
        assert len(nodes) == step.node_count, (
            f"{where}: used nodes {sorted(nodes)}, expected {step.node_count}"
        )
    if step.on_nodes is not None:
        assert set(nodes) <= step.on_nodes, (
            f"{where}: used {sorted(nodes)}, expected within {step.on_nodes}"
        )
    for expected, measure in ((step.cores_on, "cores"), (step.gpus_on, "gpus")):
        for node, count in (expected or {}).items():
            got = len(getattr(nodes[node], measure)) if node in nodes else 0
            assert got == count, f"{where}: {measure} on {node} = {got}, expected {count}"
    for node, mib in (step.memory_on or {}).items():
        got = nodes[node].memory_mib if node in nodes else 0
        assert got == mib, f"{where}: memory on {node} = {got} MiB, expected {mib}"


def _cancel(run: _Run, step: Step, where: str, factory: MatcherFactory, case: Case) -> None:
    result = run.held.pop(step.label)
    for jobid in result.jobids:
        assert run.matcher.cancel(jobid), f"{where}: cancel of job {jobid} failed"


def _restart(run: _Run, step: Step, where: str, factory: MatcherFactory, case: Case) -> None:
    records = [a.to_json() for held in run.held.values() for a in held.allocations.values()]
    run.matcher = factory(run.graph, case.policy)
    for record in records:
        run.matcher.restore(Allocation.from_json(record))
    held_ids = set(run.matcher.allocations())
    expected = {Allocation.from_json(r).jobid for r in records}
    assert expected <= held_ids, f"{where}: restored {held_ids}, expected {expected}"


def _down(run: _Run, step: Step, where: str, factory: MatcherFactory, case: Case) -> None:
    run.matcher.set_node_down(step.node, step.action == "down")


def _satisfiable(run: _Run, step: Step, where: str, factory: MatcherFactory, case: Case) -> None:
    specs = group_jobspecs(Group(step.label, step.group), run.graph)
    answer = all(run.matcher.satisfiable(spec.jobspec) for spec in specs)
    assert answer == step.fits, f"{where}: satisfiable={answer}, expected {step.fits}"


_STEP = {
    "match": _match,
    "cancel": _cancel,
    "restart": _restart,
    "down": _down,
    "up": _down,
    "satisfiable": _satisfiable,
}
