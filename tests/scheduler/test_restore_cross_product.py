"""A restart at any write, over every pod shape, grouping and matcher, loses no pod (issue 27).

The cross product:

* **shapes**: whole cores, millicores, memory only, the one exclusive qpu, a shared
  licence (three of them), millicores plus the qpu, a large init container, and a
  native sidecar beside the app;
* **groupings**: a lone pod, a gang, and a hybrid group (a scout holding the qpu in
  its own PodGroup, gated workers in another, ungated by the test once the scout runs,
  as the scout's sidecar has Fluence do);
* **matchers**, always behind the pool as ``fluence up`` runs them: the embedded
  matcher (joint group matching, behind ``PooledGroupMatcher``), the embedded matcher
  driven one jobspec at a time behind the plain ``PooledMatcher`` (the path any matcher
  without joint matching takes, Fluxion's), and Fluxion itself when
  ``FLUENCE_FLUXION_LIB`` names its library (each restart checks that the matcher in
  charge is the one asked for: a library that failed to load would otherwise leave
  the embedded matcher testing itself under Fluxion's name);
* **kill points**: before each write of the first scheduler (so after each write too,
  and after the last), again at a write of the second; each restart is a new
  Scheduler on what the fake cluster kept;
* **spoiled records** (a third test): after a kill, one record is made unreadable,
  removed, or given another record's job ids, so it cannot be restored exactly.

After every restart (run until nothing changes) the invariants hold: no bound pod was
deleted or moved; no node's CPU or memory and no virtual resource is booked twice; every
gang is whole or wholly pending; the matcher's allocations are what the bound pods
request, no more, no less. Then the bound work finishes unit by unit and the rest must
follow under the same invariants.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fluence_core import hookimpl, names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.pooled import SHARED_JOBIDS
from fluence_core.models import NodeInfo, PodRequest
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.resource_config import ResourceConfig, parse_resource_config
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.restart.fallback import HELD_FROM_POD
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from tests.scheduler.conftest import node, pod_group
from tests.scheduler.faults import Faulty, Killed

FLUXION_LIB = os.environ.get("FLUENCE_FLUXION_LIB")
RESOURCES = """
resources:
  - type: qpu
    name: cepheus
  - type: lic
    name: lic
    count: 3
"""
INSTANCES = {("qpu", "cepheus"): 1, ("lic", "lic"): 3}
NODE_COUNT, NODE_CPU, NODE_MEMORY_MIB = 3, 4, 8192
CHUNK_MIB = NODE_MEMORY_MIB // NODE_CPU
"""One memory chunk per core (the default ``memory_chunks_per_core``)."""

SHAPES: dict[str, dict[str, Any]] = {
    "whole": {"requests": {"cpu": "1"}},
    "whole2": {"requests": {"cpu": "2"}},
    "milli": {"requests": {"cpu": "300m"}},
    "memory": {"requests": {"memory": "2Gi"}},
    "qpu": {"requests": {"cpu": "1", "fluxion.flux-framework.org/qpu": "1"}},
    "lic": {"requests": {"cpu": "1", "fluxion.flux-framework.org/lic": "1"}},
    "milli+qpu": {"requests": {"cpu": "100m", "fluxion.flux-framework.org/qpu": "1"}},
    "init": {"init": [{"cpu": "2"}], "requests": {"cpu": "500m"}},
    "sidecar": {"sidecars": [{"cpu": "500m"}], "requests": {"cpu": "1"}},
}
"""Each shape's app container requests, with its classic init containers' and sidecars'."""


def shaped_pod(name: str, shape: str, *, group: str | None = None,
               gated: bool = False) -> dict[str, Any]:
    """A Fluence pod of one of :data:`SHAPES` (extended resources as limits too)."""
    shaped = SHAPES[shape]
    requests: Mapping[str, str] = shaped["requests"]
    return make_pod_dict(name, None, extra=requests,
                         limits={k: v for k, v in requests.items() if "/" in k},
                         init=shaped.get("init", ()), sidecars=shaped.get("sidecars", ()),
                         group=group, gates=[names.QUANTUM_GATE] if gated else [])


@dataclass(frozen=True)
class Unit:
    """One lone pod, gang or hybrid group of the workload."""

    name: str
    kind: str
    """``single``, ``gang`` or ``hybrid``."""
    shapes: tuple[str, ...]
    """Its pods' shapes (a hybrid's first is the scout's)."""

    def objects(self) -> Iterator[tuple[Any, dict[str, Any]]]:
        if self.kind == "single":
            yield PODS, shaped_pod(self.name, self.shapes[0])
        elif self.kind == "gang":
            yield PODGROUPS, pod_group(self.name, len(self.shapes))
            for i, shape in enumerate(self.shapes):
                yield PODS, shaped_pod(f"{self.name}-{i}", shape, group=self.name)
        else:
            yield PODGROUPS, pod_group(f"{self.name}-scout", 1)
            yield PODS, shaped_pod(f"{self.name}-scout", self.shapes[0],
                                   group=f"{self.name}-scout")
            yield PODGROUPS, pod_group(self.name, len(self.shapes) - 1)
            for i, shape in enumerate(self.shapes[1:]):
                yield PODS, shaped_pod(f"{self.name}-{i}", shape, group=self.name, gated=True)

    def pods(self) -> list[str]:
        return [obj["metadata"]["name"] for resource, obj in self.objects() if resource is PODS]


def populated(units: list[Unit]) -> FakeCluster:
    """The nodes, then the units' objects, each created a second after the one before (so
    the units are placed in their order, the oldest first)."""
    moments = itertools.count()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    cluster = FakeCluster(now=lambda: start + timedelta(seconds=next(moments)))
    for i in range(NODE_COUNT):
        cluster.create(NODES, node(f"n{i}", cpu=NODE_CPU, memory=f"{NODE_MEMORY_MIB}Mi"))
    for unit in units:
        for resource, obj in unit.objects():
            cluster.create(resource, obj, "default")
    return cluster


# -- matchers -------------------------------------------------------------------------------


class OneAtATime:
    """The embedded matcher without joint matching: a group's jobspecs go one by one, in
    the orders :func:`~fluence_core.matcher.group.match_group` tries (Fluxion's path)."""

    def __init__(self, inner: EmbeddedMatcher) -> None:
        self.inner = inner
        self.name = "embedded-one-at-a-time"

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        return self.inner.match_allocate(jobspec)

    def cancel(self, jobid: int) -> bool:
        return self.inner.cancel(jobid)

    def restore(self, allocation: Allocation) -> None:
        self.inner.restore(allocation)

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool:
        return self.inner.satisfiable(jobspec)

    def add_node(self, node_info: NodeInfo) -> None:
        self.inner.add_node(node_info)

    def remove_node(self, name: str) -> None:
        self.inner.remove_node(name)

    def set_node_down(self, name: str, down: bool = True) -> None:
        self.inner.set_node_down(name, down)

    def allocations(self) -> Mapping[int, Allocation]:
        return self.inner.allocations()


class _OneAtATimePlugin:
    @hookimpl(tryfirst=True)
    def fluence_matcher(self, settings: Any, graph: ResourceGraph) -> Matcher:
        return OneAtATime(EmbeddedMatcher(graph))


MATCHERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("one-at-a-time", id="one-at-a-time"),
    pytest.param("fluxion", id="fluxion", marks=pytest.mark.skipif(
        not FLUXION_LIB, reason="Fluxion matcher unavailable: FLUENCE_FLUXION_LIB is not set "
                                "(path to flux-sched's libreapi_cli.so)")),
]


@functools.cache
def _manager(matcher: str) -> FluencePluginManager:
    """One plugin manager per matcher (loading the plugins takes 0.2 s)."""
    if matcher == "fluxion":
        return get_plugin_manager(load_settings())
    extra = [("one-at-a-time", _OneAtATimePlugin())] if matcher == "one-at-a-time" else []
    return get_plugin_manager(load_settings(disable_plugins=["fluxion"]), extra)


@functools.cache
def _config() -> ResourceConfig:
    return parse_resource_config(RESOURCES, "cross-product.yaml")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLUENCE_* setting from the shell but the Fluxion library's path."""
    for variable in list(os.environ):
        if variable.upper().startswith("FLUENCE_") and variable != "FLUENCE_FLUXION_LIB":
            monkeypatch.delenv(variable)


MATCHER_NAMES = {"embedded": "embedded", "one-at-a-time": "embedded-one-at-a-time",
                 "fluxion": "fluxion"}
"""The name each matcher of :data:`MATCHERS` reports once in charge."""


def scheduler_on(cluster: Any, matcher: str) -> Scheduler:
    return Scheduler(cluster, load_settings(), _manager(matcher), config=_config())


def start(scheduler: Scheduler, matcher: str) -> None:
    """Start ``scheduler``: list, restore, keep promises; then check that ``matcher`` is the
    one in charge."""
    scheduler.start()
    assert scheduler.matcher.name == MATCHER_NAMES[matcher], (
        f"asked for {matcher}, {scheduler.matcher.name} is in charge")


# -- running and killing --------------------------------------------------------------------


def ungate_workers(cluster: FakeCluster, units: list[Unit]) -> bool:
    """What a scout's sidecar has Fluence do once the scout runs: stamp its backend on its
    workers and remove their gate. Whether any worker was ungated."""
    changed = False
    for unit in units:
        if unit.kind != "hybrid":
            continue
        scout = cluster.get(PODS, f"{unit.name}-scout", "default")
        if scout is None or not g.is_bound(scout) or g.is_finished(scout):
            continue
        backend = (scout["metadata"].get("annotations") or {}).get(names.BACKEND_ANNOTATION)
        for i in range(len(unit.shapes) - 1):
            worker = cluster.get(PODS, f"{unit.name}-{i}", "default")
            if worker is None or not g.is_gated(worker):
                continue
            patch: dict[str, Any] = {"spec": {"schedulingGates": None}}
            if backend:
                patch["metadata"] = {"annotations": {names.BACKEND_ANNOTATION: backend}}
            cluster.patch(PODS, worker["metadata"]["name"], patch, "default")
            changed = True
    return changed


def quiesce(scheduler: Scheduler, cluster: FakeCluster, units: list[Unit],
            rounds: int = 20) -> None:
    """Pump and schedule (ungating workers as their scouts start) until nothing changes."""
    for _ in range(rounds):
        scheduler.pump()
        results = scheduler.schedule_once()
        ungated = ungate_workers(cluster, units)
        if not scheduler.pump() and not ungated and not any(r.placed for r in results):
            return


def run_until_killed(scheduler: Scheduler, matcher: str, cluster: FakeCluster,
                     units: list[Unit]) -> bool:
    try:
        start(scheduler, matcher)
        quiesce(scheduler, cluster, units)
    except Killed:
        return True
    return False


def bound_pods(cluster: FakeCluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.list(PODS).items
            if g.is_bound(p) and not g.is_finished(p)}


# -- records a user or a bug spoiled -------------------------------------------------------

CORRUPTIONS = ("garble", "remove", "clash", "renumber")
"""How a record is spoiled before the final restart: unreadable JSON; the annotation removed;
the job ids of another record (so it cannot be restored beside it); each job id moved into
the other kind's id space (the matcher's below ``SHARED_JOBIDS``, the pool's above)."""


def _recorded_owners(cluster: FakeCluster) -> list[tuple[Any, dict[str, Any]]]:
    owners = []
    for resource in (PODGROUPS, PODS):
        for obj in cluster.list(resource, "default").items:
            if names.ALLOCATION_ANNOTATION in (obj["metadata"].get("annotations") or {}):
                owners.append((resource, obj))
    return owners


def spoil(cluster: FakeCluster, how: str, which: int) -> str | None:
    """Spoil the record of the ``which``-th owner carrying one (modulo); the group whose
    members it holds (None when it is a lone pod's, or no record exists)."""
    owners = _recorded_owners(cluster)
    if not owners:
        return None
    resource, obj = owners[which % len(owners)]
    raw = obj["metadata"]["annotations"][names.ALLOCATION_ANNOTATION]
    value: str | None = "{not json"
    if how == "remove":
        value = None
    elif how == "clash" and len(owners) > 1:
        other = owners[(which + 1) % len(owners)][1]
        ids = [a["jobid"] for entry in json.loads(
            other["metadata"]["annotations"][names.ALLOCATION_ANNOTATION])
            for a in entry["allocations"].values()]
        records = json.loads(raw)
        for entry in records:
            for i, allocation in enumerate(entry["allocations"].values()):
                allocation["jobid"] = ids[i % len(ids)]
        value = json.dumps(records)
    elif how == "renumber":
        records = json.loads(raw)
        for entry in records:
            for allocation in entry["allocations"].values():
                jobid = allocation["jobid"]
                allocation["jobid"] = (jobid - SHARED_JOBIDS + 1 if jobid >= SHARED_JOBIDS
                                       else jobid + 2 * SHARED_JOBIDS)
        value = json.dumps(records)
    cluster.patch(resource, obj["metadata"]["name"], {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: value, names.JOBIDS_ANNOTATION: None}}}, "default")
    return obj["metadata"]["name"] if resource is PODGROUPS else None


# -- the invariants -------------------------------------------------------------------------


def check_after_restart(cluster: FakeCluster, scheduler: Scheduler,
                        before: Mapping[str, str], writes: list[str],
                        spoiled: str | None = None) -> None:
    """The four invariants of issue 27, and no deletion at all. The ``spoiled`` group (its
    record was spoiled) keeps its running members whatever its size: only its members not
    yet bound may wait, and only when its running ones were bound before."""
    assert not [w for w in writes if w.startswith("delete")], f"Fluence deleted: {writes}"
    now = bound_pods(cluster)
    for name, node_name in before.items():
        found = cluster.get(PODS, name, "default")
        assert found is not None, f"bound pod {name} was deleted"
        if not g.is_finished(found):
            assert now.get(name) == node_name, f"{name} moved from {node_name} to {now.get(name)}"
    live = [p for p in cluster.list(PODS).items if not g.is_finished(p)]
    running = [p for p in live if g.is_bound(p)]
    requests = {p["metadata"]["name"]: PodRequest.from_kube(p) for p in running}

    # no node and no virtual resource booked twice
    cpu: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    memory_at_most: Counter[str] = Counter()
    virtual: Counter[tuple[str, str]] = Counter()
    for pod in running:
        request = requests[pod["metadata"]["name"]]
        node_name = pod["spec"]["nodeName"]
        cpu[node_name] += request.millicores if request.millicores is not None \
            else 1000 * request.cores
        memory[node_name] += request.memory_mib
        chunks = -(-request.memory_mib // CHUNK_MIB)  # whole cores hold whole memory chunks
        memory_at_most[node_name] += request.memory_mib if request.shared \
            else chunks * CHUNK_MIB
        backend = (pod["metadata"].get("annotations") or {}).get(names.BACKEND_ANNOTATION)
        for vtype, count in request.virtual.items():
            assert backend, f"{pod['metadata']['name']} holds {vtype} but names no backend"
            virtual[(vtype, backend)] += count
    for node_name, used in cpu.items():
        assert used <= 1000 * NODE_CPU, f"{node_name}: {used}m of {NODE_CPU} cpu booked"
    for node_name, used in memory.items():
        assert used <= NODE_MEMORY_MIB, f"{node_name}: {used} MiB booked"
    for key, used in virtual.items():
        assert used <= INSTANCES[key], f"{key} booked {used} times, {INSTANCES[key]} exist"

    # every gang whole or wholly pending
    for pod_group_obj in cluster.list(PODGROUPS).items:
        group = pod_group_obj["metadata"]["name"]
        members = [p for p in live if g.pod_group_name(p) == group]
        placed = [p for p in members if g.is_bound(p)]
        if group == spoiled and all(p["metadata"]["name"] in before for p in placed):
            continue
        assert not placed or len(placed) == len(members), \
            f"gang {group} split: {len(placed)} of {len(members)} bound"

    # the matcher's allocations are what the bound pods hold
    held_cpu: Counter[str] = Counter()
    held_memory: Counter[str] = Counter()
    held_virtual: Counter[tuple[str, str]] = Counter()
    with scheduler.view.lock:
        for allocation in scheduler.matcher.allocations().values():
            for share in allocation.nodes:
                held_cpu[share.node] += 1000 * len(share.cores) + share.millicores
                held_memory[share.node] += share.memory_mib
            for vertex in allocation.virtual:
                held_virtual[(vertex.type, vertex.backend)] += 1
    whole = {n: v for n, v in cpu.items() if v}
    assert {n: v for n, v in held_cpu.items() if v} == whole, \
        f"the matcher holds {dict(held_cpu)} millicores, the pods request {dict(cpu)}"
    for node_name in set(held_memory) | set(memory):
        assert held_memory[node_name] >= memory[node_name], f"{node_name}: memory unheld"
        assert held_memory[node_name] <= memory_at_most[node_name], \
            f"{node_name}: {held_memory[node_name] - memory[node_name]} MiB held by nobody"
    assert held_virtual == virtual, \
        f"the matcher holds {dict(held_virtual)}, the pods hold {dict(virtual)}"


def finish_unit(cluster: FakeCluster, unit: Unit) -> None:
    for name in unit.pods():
        found = cluster.get(PODS, name, "default")
        if found is not None and g.is_bound(found):
            cluster.patch_status(PODS, name, {"status": {"phase": "Succeeded"}}, "default")


def restart_scenario(units: list[Unit], matcher: str, first_kill: int, second_kill: int,
                     spoiling: tuple[str, int] | None = None) -> None:
    """Kill a scheduler at ``first_kill`` (and another at ``second_kill``, 0: none), spoil a
    record if asked, restart, check; then finish unit by unit, restart once more, check each
    time."""
    cluster = populated(units)
    writes: list[str] = []
    before: dict[str, str] = {}
    for kill in (first_kill, second_kill):
        if not kill:
            continue
        faulty = Faulty(cluster, kill)
        run_until_killed(scheduler_on(faulty, matcher), matcher, cluster, units)
        writes += faulty.writes
        before.update(bound_pods(cluster))
    spoiled = spoil(cluster, *spoiling) if spoiling else None
    faulty = Faulty(cluster)
    final = scheduler_on(faulty, matcher)
    start(final, matcher)
    quiesce(final, cluster, units)
    check_after_restart(cluster, final, before, writes + faulty.writes, spoiled)
    if spoiling:
        held = len(cluster.events(reason=HELD_FROM_POD))
        event(f"{spoiling[0]}: {'some' if held else 'no'} pod held from what it requests")
    for unit in units:
        before = bound_pods(cluster)
        finish_unit(cluster, unit)
        quiesce(final, cluster, units)
        check_after_restart(cluster, final, before, faulty.writes, spoiled)
    before = bound_pods(cluster)
    again = Faulty(cluster)
    restarted = scheduler_on(again, matcher)
    start(restarted, matcher)
    quiesce(restarted, cluster, units)
    check_after_restart(cluster, restarted, before, again.writes)


# -- the tests ------------------------------------------------------------------------------

REPORTED = [
    Unit("holder", "single", ("milli+qpu",)),
    Unit("two", "single", ("whole2",)),
    Unit("m1", "single", ("milli",)),
    Unit("m2", "single", ("milli",)),
    Unit("mem", "single", ("memory",)),
    Unit("gm", "gang", ("milli", "milli")),
    Unit("side", "single", ("sidecar",)),
    Unit("second", "single", ("milli+qpu",)),
]
"""The mixed run of issue 27: the qpu holder bound first, then pods of other shapes and a
millicore gang, and a second pod asking for the same qpu."""


@functools.cache
def _writes(matcher: str) -> tuple[str, ...]:
    cluster = populated(REPORTED)
    faulty = Faulty(cluster)
    scheduler = scheduler_on(faulty, matcher)
    start(scheduler, matcher)
    quiesce(scheduler, cluster, REPORTED)
    return tuple(faulty.writes)


@pytest.mark.parametrize("matcher", MATCHERS)
def test_the_reported_mixed_run_killed_before_and_after_each_write_loses_no_pod(
    matcher: str,
) -> None:
    writes = _writes(matcher)
    assert any(w == "bind default/holder" for w in writes)
    assert not any(w == "bind default/second" for w in writes), "the qpu is the holder's"
    for kill in range(1, len(writes) + 2):
        restart_scenario(REPORTED, matcher, kill, 0)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[Unit], int, int]:
    """Up to 4 units of any grouping and shape, and two kill points (0: no second kill)."""
    shape = st.sampled_from(sorted(SHAPES))
    units = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["single", "gang", "hybrid"]))
        if kind == "single":
            shapes: tuple[str, ...] = (draw(shape),)
        elif kind == "gang":
            shapes = tuple(draw(st.lists(shape, min_size=2, max_size=3)))
        else:
            scout = draw(st.sampled_from(["qpu", "milli+qpu"]))
            workers = draw(st.lists(st.sampled_from(["whole", "milli", "memory", "sidecar"]),
                                    min_size=1, max_size=2))
            shapes = (scout, *workers)
        units.append(Unit(f"u{i}", kind, shapes))
    return units, draw(st.integers(1, 60)), draw(st.integers(0, 30))


@pytest.mark.parametrize("matcher", MATCHERS)
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads(), how=st.sampled_from(CORRUPTIONS), which=st.integers(0, 9))
def test_a_spoiled_record_after_a_kill_loses_no_pod_and_books_nothing_twice(
    matcher: str, case: tuple[list[Unit], int, int], how: str, which: int,
) -> None:
    units, first_kill, _ = case
    restart_scenario(units, matcher, first_kill, 0, (how, which))


@pytest.mark.parametrize("matcher", MATCHERS)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_any_shape_and_grouping_killed_twice_at_any_write_loses_no_pod(
    matcher: str, case: tuple[list[Unit], int, int],
) -> None:
    units, first_kill, second_kill = case
    restart_scenario(units, matcher, first_kill, second_kill)
