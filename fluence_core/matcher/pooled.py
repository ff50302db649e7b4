"""The shared CPU and memory pool: fractional pods draw from it, whole cores stay exclusive.

The kubelet counts CPU in millicores. A pod asking for whole CPUs gets whole cores
(the static CPU manager's exclusive cores; Fluxion's core vertices mean that). A
pod asking for a fraction (``100m``, ``1500m``) or for no CPU shares the node's
*pool*: the node's cores not held exclusively. So one node's CPU is bounded by
``1000 x exclusive cores + pooled millicores <= allocatable millicores``, as
kube-scheduler bounds it.

The pool is a layer in front of any matcher, not a vertex, because its size is not
fixed: it is what the exclusive cores leave, and changes with every whole-core job.
It *leases* whole core vertices (and memory chunks) from the inner matcher with
one-core jobspecs pinned to the node (``hostlist``) as it grows, and gives a lease
back as soon as it can do without it. Whatever both matchers can do (whole cores,
memory chunks, GPUs, virtual vertices) is theirs; the millicore and MiB arithmetic
is this module's alone. A node's allocatable above its whole cores (``7500m`` = 7
cores + 500m) is in the pool from the start.

A shared allocation (the compute jobspec of fractional pods, whose slots hold
``millicores`` and ``memory`` in MiB) has job ids of its own (:data:`SHARED_JOBIDS`)
and one :class:`NodeShare` per node, so the durable record restores it like any other
allocation. How the two id spaces stay apart across a restart: :func:`restore_order`
and :func:`misnumbered`; the pod limit and the known limits: :class:`PooledMatcher`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluence_core import names
from fluence_core.errors import MatcherError
from fluence_core.graph import Domain, NodeVertex, ResourceGraph
from fluence_core.matcher.jobspec import MILLICORES
from fluence_core.matcher.base import (
    Allocation, GroupMatcher, GroupRefusal, Matcher, MatchOutcome, NodeShare,
)
from fluence_core.matcher.constraints import (
    FEW_HOSTS, Predicate, compile_constraint, few_hosts,
)
from fluence_core.matcher.pool_index import PoolIndex
from fluence_core.models import NodeInfo

SHARED_JOBIDS = 1 << 40
"""Shared allocations are numbered from here, apart from any matcher's own job ids."""


def is_shared_allocation(allocation: Allocation) -> bool:
    """Whether ``allocation`` draws from the nodes' pools (numbered from SHARED_JOBIDS)."""
    return allocation.jobid >= SHARED_JOBIDS


def misnumbered(allocation: Allocation) -> str | None:
    """Why ``allocation``'s job id is in the wrong id space for what it holds, or None.

    A shared allocation holds millicores and MiB of nodes' pools only; every other holds
    vertices (cores, GPUs, memory chunks, virtual resources) of the inner matcher and no
    millicores. Only an edited or corrupt record breaks this."""
    if is_shared_allocation(allocation):
        if allocation.virtual or any(s.cores or s.gpus or s.memory for s in allocation.nodes):
            return (f"its id is a shared allocation's (from {SHARED_JOBIDS}) but it holds "
                    "cores, GPUs, memory chunks or virtual resources")
    elif any(s.millicores for s in allocation.nodes):
        return (f"its id is the matcher's (below {SHARED_JOBIDS}) but it holds millicores of "
                "a node's shared pool")
    return None


def restores_later(allocation: Allocation) -> bool:
    """Whether restoring ``allocation`` allocates something new (a shared allocation leases
    cores and memory chunks from the inner matcher): restore it after every other."""
    return is_shared_allocation(allocation)


def restore_order(allocations: Iterable[Allocation]) -> list[Allocation]:
    """``allocations`` in the order that reserves every recorded inner job id before a lease
    can take it.

    Three kinds of job share one matcher: jobs the inner matcher numbers itself
    (whole-core compute, virtual vertices, and this module's core and memory leases),
    and shared allocations, numbered here from :data:`SHARED_JOBIDS` (``1 << 40``, far
    beyond any id an inner matcher reaches). Leases draw from the inner matcher's
    counter, which starts again at 1 in a new process, while a restart brings back
    recorded inner ids; restoring a shared allocation makes leases, so it must come
    after every recorded inner id is held again, or a lease takes an id a record still
    needs and that record then fails to restore as "already held". Restoring inner ids
    first reserves them, whatever order the records are read in."""
    return sorted(allocations, key=restores_later)


def is_shared_jobspec(jobspec: Mapping[str, Any]) -> bool:
    for resource in jobspec.get("resources") or ():
        for inner in resource.get("with") or ():
            if inner.get("type") == MILLICORES:
                return True
    return False


@dataclass
class _Pool:
    """One node's pool: what its whole cores leave, plus the cores leased to it."""

    base_millicores: int
    base_mib: int
    chunk_mib: int
    used_millicores: int = 0
    used_mib: int = 0
    core_leases: list[int] = field(default_factory=list)
    memory_leases: list[int] = field(default_factory=list)

    @property
    def millicores(self) -> int:
        return self.base_millicores + 1000 * len(self.core_leases)

    @property
    def mib(self) -> int:
        return self.base_mib + self.chunk_mib * len(self.memory_leases)

    def short(self, millicores: int, mib: int) -> tuple[int, int]:
        """Cores and memory chunks to lease before ``millicores`` and ``mib`` more fit."""
        cores = max(0, math.ceil((self.used_millicores + millicores - self.millicores) / 1000))
        over = self.used_mib + mib - self.mib
        chunks = max(0, math.ceil(over / self.chunk_mib)) if over > 0 and self.chunk_mib else 0
        if over > 0 and not self.chunk_mib:
            chunks = -1  # no chunk to lease: it can never fit
        return cores, chunks


@dataclass
class _Shared:
    allocation: Allocation


def _slot_demand(jobspec: Mapping[str, Any]) -> tuple[int, int, int]:
    """(slots, millicores per slot, MiB per slot) of a shared jobspec."""
    resources: list[Mapping[str, Any]] = list(jobspec.get("resources") or [])
    if len(resources) != 1 or resources[0].get("type") != "slot":
        raise MatcherError("a shared jobspec holds one slot entry")
    slot = resources[0]
    inner = {r.get("type"): r for r in slot.get("with") or ()}
    unknown = set(inner) - {MILLICORES, "memory"}
    if unknown:
        raise MatcherError(f"a shared slot holds millicores and memory only, not {sorted(unknown)}")
    return (int(slot.get("count", 1)), int(inner[MILLICORES].get("count", 0)),
            int((inner.get("memory") or {}).get("count", 0)))


def _constraints(jobspec: Mapping[str, Any]) -> Any:
    return ((jobspec.get("attributes") or {}).get("system") or {}).get("constraints")


def _lease_jobspec(node: str, what: str, amount: int) -> dict[str, Any]:
    """One whole core (``what="core"``) or one memory chunk, on ``node``, for the pool."""
    unit = {"unit": "MiB"} if what == "memory" else {}
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "pool",
                       "with": [{"type": what, "count": amount, **unit}]}],
        "tasks": [{"command": ["fluence"], "slot": "pool", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0, "constraints": {
            "and": [{"properties": [names.VIRTUAL_FALSE]}, {"hostlist": [node]}]}}},
    }


class PooledMatcher:
    """Any matcher, plus the shared pool of every node (see the module's docstring).

    **Pod limit.** The pool counts the pods on each node that pass through it (shared
    pods, and the inner matcher's allocations it hands out or restores) and places no
    shared pod on a node at its allocatable ``pods``, so fractional pods never pile up
    past the kubelet's limit for the pod-limit filter to veto.

    **Finding a node** costs ``log2(n)`` steps, not a walk of every node
    (:mod:`.pool_index`), unless the jobspec names a few hosts, which are walked.

    Known limits: a node where a memory chunk could not be leased comes after every
    other node for a pod smaller than the one refused there, until something on it is
    given back; a lease takes one pod slot in the embedded matcher's count, and the
    embedded matcher does not see the pool's pods in its own count (a whole-core pod may
    go to a node the pool filled; the pod-limit filter vetoes it); shared pods take no
    GPUs (a pod with GPUs is placed on whole cores); pool leases are not in
    :meth:`allocations` (they are re-made from the shared allocations on restore).
    """

    def __init__(self, inner: Matcher, graph: ResourceGraph) -> None:
        self.inner = inner
        self.graph = graph
        self.name = inner.name
        self.last_outcome: MatchOutcome | None = None
        self._pools: dict[str, _Pool] = {}
        self._shared: dict[int, Allocation] = {}
        self._next = SHARED_JOBIDS
        self._pods: dict[str, int] = {}
        """Pods held on each node: shared ones and the inner matcher's (not the leases)."""
        self._inner_pods: dict[int, tuple[tuple[str, int], ...]] = {}
        """The inner allocations handed out or restored: (node, pods) of each share."""
        self._inner_cores: dict[int, tuple[tuple[str, int], ...]] = {}
        """The same allocations' (node, whole cores) of each share."""
        self._held_cores: dict[str, int] = {}
        """Whole cores the inner matcher holds on each node, the pool's own leases included."""
        self._free: dict[Domain, int] | None = None
        """Free whole cores of each narrowest topology domain (built when first asked, dropped
        when a node comes, goes or changes state), for :meth:`_tightest_first`."""
        self._members: dict[Domain, list[str]] = {}
        self._index: PoolIndex | None = None
        """Built at the first shared match; kept current from then on."""
        self._capped: dict[str, int] = {}
        """Nodes where a core lease failed (the inner matcher holds their cores), with how many
        more cores did lease before it: offered for no more than that until an inner
        allocation is given back."""
        self._memory_short: dict[str, int] = {}
        """Nodes where a memory chunk lease failed, with the least MiB a pod asked there
        then: no chunk is asked there again for a pod asking as much or more, and while the
        pool's free MiB is below that the index hides the node (:meth:`_place_one` tries it
        last, for a smaller pod), until a pod of its pool or an inner allocation is given
        back. Without it every later pod asked the inner matcher for a chunk on every node
        whose chunks were all held: one failed match per full node per pod."""

    # -- the Matcher protocol ------------------------------------------------------------

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        if not is_shared_jobspec(jobspec):
            allocation = self.inner.match_allocate(jobspec)
            self.last_outcome = getattr(self.inner, "last_outcome", None)
            if allocation is not None:
                self._count_inner(allocation)
            return allocation
        return self._allocate_shared(jobspec)

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool:
        if not is_shared_jobspec(jobspec):
            return self.inner.satisfiable(jobspec)
        _, millicores, mib = _slot_demand(jobspec)
        return any(self._could_ever(n, millicores, mib) for n in self._candidates(jobspec))

    def cancel(self, jobid: int) -> bool:
        allocation = self._shared.pop(jobid, None)
        if allocation is None:
            cancelled = self.inner.cancel(jobid)
            if cancelled:
                self._uncount_inner(jobid)
            return cancelled
        for share in allocation.nodes:
            self._put_back(share)
        return True

    def restore(self, allocation: Allocation) -> None:
        wrong = misnumbered(allocation)
        if wrong is not None:
            raise MatcherError(f"cannot restore job {allocation.jobid}: {wrong}")
        if allocation.jobid < SHARED_JOBIDS:
            self.inner.restore(allocation)
            self._count_inner(allocation)
            return
        if allocation.jobid in self._shared:
            raise MatcherError(f"cannot restore job {allocation.jobid}: already held")
        taken: list[NodeShare] = []
        for share in allocation.nodes:
            if not self.graph.has_node(share.node) or not self._take(
                    share.node, share.millicores, share.memory_mib):
                for done in taken:
                    self._put_back(done)
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: node {share.node} "
                    f"has no room for {share.millicores}m and {share.memory_mib} MiB"
                )
            taken.append(share)
            self._count(share.node, share.pods)
        self._shared[allocation.jobid] = allocation
        self._next = max(self._next, allocation.jobid + 1)

    def vertex_allocations(self) -> Mapping[int, Allocation]:
        """Every allocation holding graph vertices: the inner matcher's, the pool's leases
        included (a core leased to the pool is not free for a whole-core pod)."""
        return self.inner.allocations()

    def allocations(self) -> Mapping[int, Allocation]:
        leased = {j for pool in self._pools.values() for j in pool.core_leases + pool.memory_leases}
        held = {j: a for j, a in self.inner.allocations().items() if j not in leased}
        held.update(self._shared)
        return held

    def add_node(self, node: NodeInfo) -> None:
        self.inner.add_node(node)
        self._free = None
        if self._index is not None and self.graph.has_node(node.name):
            self._index.add(node.name)
            self._refresh(node.name)

    def remove_node(self, name: str) -> None:
        self._pools.pop(name, None)
        self._capped.pop(name, None)
        self._memory_short.pop(name, None)
        self._held_cores.pop(name, None)
        self._free = None
        self.inner.remove_node(name)
        if self._index is not None:
            self._index.remove(name)

    def set_node_down(self, name: str, down: bool = True) -> None:
        self.inner.set_node_down(name, down)
        self._free = None
        self._refresh(name)

    def __getattr__(self, attribute: str) -> Any:
        """Anything else a matcher offers (its statistics, its plugin status) is the inner's."""
        return getattr(self.inner, attribute)

    # -- shared allocations ----------------------------------------------------------------

    def _candidates(self, jobspec: Mapping[str, Any]) -> list[NodeVertex]:
        """Every node the jobspec may use, for the verdict of a miss only: the few hosts it
        names when it names some (a walk of all nodes otherwise)."""
        constraints = _constraints(jobspec)
        predicate = compile_constraint(constraints)
        hosts = few_hosts(constraints)
        nodes = self.graph.nodes if hosts is None else [
            self.graph.node(h) for h in hosts if self.graph.has_node(h)]
        return [n for n in nodes if not n.down and predicate(n.name, n.properties, n.rank)]

    def _pool(self, vertex: NodeVertex) -> _Pool:
        pool = self._pools.get(vertex.name)
        if pool is None:
            pool = self._pools[vertex.name] = _Pool(
                base_millicores=max(0, vertex.millicores - 1000 * vertex.cores),
                base_mib=max(0, vertex.memory_mib - vertex.memory_chunks * vertex.chunk_mib),
                chunk_mib=vertex.chunk_mib,
            )
        return pool

    def _could_ever(self, vertex: NodeVertex, millicores: int, mib: int) -> bool:
        return vertex.millicores >= millicores and vertex.memory_mib >= mib

    def _allocate_shared(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        slots, millicores, mib = _slot_demand(jobspec)
        constraints = _constraints(jobspec)
        predicate = compile_constraint(constraints)
        hosts = few_hosts(constraints)
        listed = None if hosts is not None else few_hosts(
            constraints, max(FEW_HOSTS, len(self.graph.node_names) // 2))
        placed: list[str] = []
        for _ in range(slots):
            node = self._place_one(predicate, hosts, millicores, mib, listed)
            if node is None:
                for done in placed:
                    self._put_back(NodeShare(done, memory_mib=mib, pods=1, millicores=millicores))
                ever = any(self._could_ever(n, millicores, mib)
                           for n in self._candidates(jobspec))
                self.last_outcome = MatchOutcome.BUSY if ever else MatchOutcome.UNSATISFIABLE
                return None
            placed.append(node)
        per_node: dict[str, int] = {}
        for node in placed:
            per_node[node] = per_node.get(node, 0) + 1
        shares = tuple(NodeShare(node, memory_mib=mib * count, pods=count,
                                 millicores=millicores * count)
                       for node, count in per_node.items())
        allocation = Allocation(self._next, shares)
        self._next += 1
        self._shared[allocation.jobid] = allocation
        self.last_outcome = None
        return allocation

    def _place_one(self, predicate: Predicate, hosts: list[str] | None, millicores: int,
                   mib: int, listed: list[str] | None = None) -> str | None:
        """The first node in rank order whose pool has room as it is, else the first that
        can lease it (with topology levels: the first of :meth:`_tightest_first`); the pod
        is drawn from it and counted there.

        ``hosts``: the few nodes the constraint names, walked node by node. ``listed``: the
        nodes of a longer hostlist (at most half the nodes): the index is walked for
        :data:`FEW_HOSTS` steps, then the rest of what it would offer, in the same order,
        is found among the listed nodes. Walking the index alone met every node with room
        the hostlist refuses (a lone pod kept off the nodes already used by anti-affinity:
        O(placed pods) per pod).
        """
        index = self._indexed()
        if hosts is not None:
            positions = index.positions(hosts)
            now: list[int] | Any = iter(positions)
            later: list[int] | Any = iter(positions)
        elif listed is not None:
            def found(position: int, leasing: int) -> bool:
                return index.room(position)[leasing] >= millicores
            ordered = _Lazy(lambda: index.positions(listed))
            now = _bounded(_walk(index.with_room, millicores), ordered,
                           lambda p: found(p, 0))
            later = (self._tightest_first(index) if self.graph.levels else _bounded(
                _walk(index.could_lease, millicores), ordered, lambda p: found(p, 1)))
        else:
            now = _walk(index.with_room, millicores)
            later = (self._tightest_first(index) if self.graph.levels
                     else _walk(index.could_lease, millicores))
        # last, the nodes short of memory the index hides: a smaller pod may still fit
        hidden: Iterator[int] = iter(()) if hosts is not None else self._hidden(index)
        walks: tuple[tuple[bool, Iterable[int]], ...] = (
            (False, now), (True, later), (True, hidden))
        for leasing, offered in walks:
            for position in offered:
                vertex = self.graph.node(index.names[position])
                if vertex.down or not self._pod_room(vertex):
                    continue
                if not predicate(vertex.name, vertex.properties, vertex.rank):
                    continue
                cores, chunks = self._pool(vertex).short(millicores, mib)
                if not leasing:
                    if (cores, chunks) != (0, 0):
                        continue
                elif chunks < 0 or cores > vertex.cores or (
                        chunks and mib >= self._memory_short.get(vertex.name, mib + 1)):
                    continue
                if self._take(vertex.name, millicores, mib):
                    self._count(vertex.name, 1)
                    return vertex.name
        return None

    def _hidden(self, index: PoolIndex) -> Iterator[int]:
        """Positions of the nodes short of memory, read only when asked (a pod that found
        no other node)."""
        yield from index.positions(list(self._memory_short))

    def _tightest_first(self, index: PoolIndex) -> Iterator[int]:
        """Positions of the nodes whose pool could grow by leasing, best fit: narrowest
        domains with the fewest free whole cores first (a domain with none is skipped), and
        in each, the node with the fewest free cores first. A pod that must take a core
        then takes it where cores are already taken, and whole racks stay free for gangs,
        as the embedded matcher's best fit keeps them for whole-core pods. Ordering the
        domains and one domain's nodes is the cost: a leasing pod on 5,000 nodes in 50
        racks (``benchmarks/bench_rack_gang.py``)."""
        free = self._domain_free()
        held, node = self._held_cores, self.graph.node
        for domain in sorted((d for d in free if free[d] > 0), key=lambda d: (free[d], d)):
            fit = {}
            for name in self._members[domain]:
                vertex = node(name)
                spare = vertex.cores - held.get(name, 0)
                if spare > 0:  # a node with no free core cannot lease
                    fit[name] = (spare, vertex.rank)
            if not fit:
                continue
            best = min(fit, key=fit.__getitem__)  # mostly taken: the rest only when it fails
            yield from _positions(index, [best])
            yield from _positions(index, sorted((n for n in fit if n != best),
                                                key=fit.__getitem__))

    def _domain_free(self) -> dict[Domain, int]:
        """Free whole cores of each narrowest domain (its usable nodes' cores less those
        held), built from the per-node counts when first asked after a node change."""
        if self._free is None:
            free: dict[Domain, int] = {}
            members: dict[Domain, list[str]] = {}
            for node in self.graph.nodes:
                if node.down:
                    continue
                free[node.domains] = free.get(node.domains, 0) + max(
                    0, node.cores - self._held_cores.get(node.name, 0))
                members.setdefault(node.domains, []).append(node.name)
            self._free, self._members = free, members
        return self._free

    def _hold_cores(self, node: str, cores: int) -> None:
        """``cores`` more (or fewer) whole cores held on ``node``, in the domain counts too."""
        if not cores:
            return
        self._held_cores[node] = self._held_cores.get(node, 0) + cores
        if self._free is not None and self.graph.has_node(node):
            vertex = self.graph.node(node)
            if not vertex.down and vertex.domains in self._free:
                self._free[vertex.domains] -= cores

    def _take(self, node: str, millicores: int, mib: int) -> bool:
        """Draw from ``node``'s pool, leasing what it lacks; all or nothing."""
        pool = self._pool(self.graph.node(node))
        cores, chunks = pool.short(millicores, mib)
        if chunks < 0:
            return False
        leased: list[tuple[list[int], int]] = []
        for leases, what, count, amount in ((pool.core_leases, "core", cores, 1),
                                            (pool.memory_leases, "memory", chunks, pool.chunk_mib)):
            for _ in range(count):
                lease = self.inner.match_allocate(_lease_jobspec(node, what, amount))
                if lease is None:
                    for owner, jobid in leased:
                        owner.remove(jobid)
                        self.inner.cancel(jobid)
                        if owner is pool.core_leases:
                            self._hold_cores(node, -1)
                    if what == "core":
                        self._capped[node] = len(leased)
                    else:
                        self._memory_short[node] = min(self._memory_short.get(node, mib), mib)
                    self._refresh(node)
                    return False
                leases.append(lease.jobid)
                leased.append((leases, lease.jobid))
                if what == "core":
                    self._hold_cores(node, 1)
        pool.used_millicores += millicores
        pool.used_mib += mib
        self._refresh(node)
        return True

    def _put_back(self, share: NodeShare) -> None:
        self._memory_short.pop(share.node, None)  # the pool's MiB came back
        pool = self._pools.get(share.node)
        if pool is not None:
            pool.used_millicores -= share.millicores
            pool.used_mib -= share.memory_mib
            self._shrink(share.node, pool)
        self._count(share.node, -share.pods)

    def _shrink(self, node: str, pool: _Pool) -> None:
        """Give back the leases the pool can do without."""
        while pool.core_leases and pool.millicores - 1000 >= pool.used_millicores:
            self.inner.cancel(pool.core_leases.pop())
            self._hold_cores(node, -1)
        while pool.memory_leases and pool.mib - pool.chunk_mib >= pool.used_mib:
            self.inner.cancel(pool.memory_leases.pop())

    # -- the pod count and the index ----------------------------------------------------

    def _pod_room(self, vertex: NodeVertex) -> bool:
        return not vertex.max_pods or self._pods.get(vertex.name, 0) < vertex.max_pods

    def _count(self, node: str, pods: int) -> None:
        if pods:
            self._pods[node] = self._pods.get(node, 0) + pods
            self._refresh(node)

    def _count_inner(self, allocation: Allocation) -> None:
        shares = tuple((share.node, share.pods) for share in allocation.nodes if share.pods)
        self._inner_pods[allocation.jobid] = shares
        for node, pods in shares:
            self._count(node, pods)
        cores = tuple((share.node, len(share.cores)) for share in allocation.nodes if share.cores)
        self._inner_cores[allocation.jobid] = cores
        for node, count in cores:
            self._hold_cores(node, count)

    def _uncount_inner(self, jobid: int) -> None:
        for node, pods in self._inner_pods.pop(jobid, ()):
            self._count(node, -pods)
        for node, count in self._inner_cores.pop(jobid, ()):
            self._hold_cores(node, -count)
        capped, self._capped = self._capped, {}  # cores came back: leases may work again
        short, self._memory_short = self._memory_short, {}
        for node in {**capped, **short}:
            self._refresh(node)

    def _indexed(self) -> PoolIndex:
        if self._index is None:
            self._index = PoolIndex()
            for vertex in self.graph.nodes:
                self._index.add(vertex.name)
                self._refresh(vertex.name)
        return self._index

    def _refresh(self, node: str) -> None:
        """Tell the index what ``node``'s pool can take now, and by leasing."""
        index = self._index
        if index is None or node not in index or not self.graph.has_node(node):
            return
        vertex = self.graph.node(node)
        if vertex.down or not self._pod_room(vertex):
            index.update(node, -1, -1)
            return
        pool = self._pool(vertex)
        short = self._memory_short.get(node)
        if short is not None and pool.mib - pool.used_mib < short:
            index.update(node, -1, -1)
            return
        now = pool.millicores - pool.used_millicores
        capped = self._capped.get(node)
        leasable = (now + 1000 * capped if capped is not None
                    else pool.base_millicores + 1000 * vertex.cores - pool.used_millicores)
        index.update(node, max(now, 0), leasable)


def _positions(index: PoolIndex, nodes: Iterable[str]) -> Iterator[int]:
    for name in nodes:
        position = index.position(name)
        if position is not None:
            yield position


class _Lazy:
    """A list made the first time it is asked for."""

    def __init__(self, make: Callable[[], list[int]]) -> None:
        self._make = make
        self._made: list[int] | None = None

    def __call__(self) -> list[int]:
        if self._made is None:
            self._made = self._make()
        return self._made


def _bounded(walk: Iterator[int], ordered: _Lazy, fits: Callable[[int], bool],
             steps: int = FEW_HOSTS) -> Iterator[int]:
    """What ``walk`` offers (ascending positions), its first ``steps`` from the walk itself,
    the rest found among ``ordered`` (the listed positions, ascending) with ``fits``: the
    same positions, less those the hostlist refuses anyway."""
    last = -1
    for count, position in enumerate(walk):
        if count == steps:
            yield from (p for p in ordered()[bisect_right(ordered(), last):] if fits(p))
            return
        last = position
        yield position


def _walk(first_from: Any, millicores: int) -> Any:
    """Positions ``first_from(millicores, start)`` offers, in order."""
    position = first_from(millicores, 0)
    while position >= 0:
        yield position
        position = first_from(millicores, position + 1)


class PooledGroupMatcher(PooledMatcher):
    """A pooled matcher over a :class:`GroupMatcher`: the inner's jobspecs jointly, the
    shared ones after, from what those leave."""

    inner: GroupMatcher

    def match_allocate_all(
        self, jobspecs: Sequence[Mapping[str, Any]]
    ) -> list[Allocation] | GroupRefusal:
        own = [i for i, spec in enumerate(jobspecs) if not is_shared_jobspec(spec)]
        shared = [i for i, spec in enumerate(jobspecs) if is_shared_jobspec(spec)]
        held: dict[int, Allocation] = {}
        if own:
            placed = self.inner.match_allocate_all([jobspecs[i] for i in own])
            if isinstance(placed, GroupRefusal):
                return GroupRefusal(own[placed.index], placed.outcome)
            for inner_allocation in placed:
                self._count_inner(inner_allocation)
            held.update(zip(own, placed))
        for index in shared:
            allocation = self._allocate_shared(jobspecs[index])
            if allocation is None:
                for taken in held.values():
                    self.cancel(taken.jobid)
                return GroupRefusal(index, self.last_outcome or MatchOutcome.BUSY)
            held[index] = allocation
        return [held[i] for i in range(len(jobspecs))]


def pooled(matcher: Matcher, graph: ResourceGraph) -> PooledMatcher:
    """``matcher`` with the shared pool in front (joint matching kept when it has it)."""
    if isinstance(matcher, PooledMatcher):
        return matcher
    if isinstance(matcher, GroupMatcher):
        return PooledGroupMatcher(matcher, graph)
    return PooledMatcher(matcher, graph)
