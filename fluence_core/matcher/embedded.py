"""The embedded matcher: Fluxion's semantics for Fluence's jobspecs, in pure Python.

It keeps counts, not vertex objects: per node a bitmask of free cores, GPUs and
memory chunks, and a max segment tree of free cores so a first-fit search never
walks the node list. Virtual vertices keep a count of held vertices per subtree
so a whole-subtree check is one comparison.

Policies follow what Fluxion does with them (see :mod:`.node_order`):
``lonode`` packs nodes from the lowest rank, ``hinode`` from the highest, taking
low (``lonode``) or high (``hinode``) core ids; ``low`` and ``high`` prefer the
lowest or highest free core id anywhere, which spreads work over equally-used
nodes. ``first`` is Fluxion's "stop at the first match": its traversal order is
not a promise, and here it is the fastest order, ``lonode``'s.

**Topology.** A jobspec whose resources start with a topology level's type (``rack
count:1 -> slot ...``, see :func:`~fluence_core.matcher.jobspec.compute_jobspec`) is held
inside one domain of that level; the compute jobspecs of one joint match share that one
domain (they are one group). Domains are tried best fit first: the least free capacity
that could still hold the group (free GPUs first when it asks for GPUs, then free
cores), so partly used domains fill before whole ones are broken into. Each domain is
searched as the whole graph would be (first fit, then the bounded search), so with a
level the match stays complete domain by domain. Free capacity per domain is kept up
to date as cores and GPUs are taken and given back, so choosing costs no walk of the
nodes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Hashable, Iterator, Mapping, Sequence

from fluence_core.errors import MatcherError
from fluence_core.graph import (
    DEVICE_TYPE, NUMA_TYPE, DeviceDemands, NodeVertex, ResourceGraph, VirtualVertex,
)
from fluence_core.log import logger
from fluence_core.matcher.base import (
    Allocation,
    GroupRefusal,
    MatchOutcome,
    NodeShare,
    VirtualShare,
)
from fluence_core.matcher.constraints import (
    FEW_HOSTS, Predicate, compile_constraint, few_hosts,
)
from fluence_core.matcher.domains import fewest_holding
from fluence_core.matcher.node_order import IdOrder, NodeOrder, RankOrder
from fluence_core.matcher.jobspec import DEVICE_DEMAND, NUMA_ALIGNED
from fluence_core.matcher.search import DEFAULT_BUDGET, search
from fluence_core.models import NodeInfo
from fluence_core.resource_config import CLUSTER
from fluence_core.settings import MatchPolicy
from fluence_core.topology import is_known

_HIGH_IDS = frozenset({MatchPolicy.HIGH, MatchPolicy.HINODE})


def _node_order(policy: MatchPolicy) -> NodeOrder:
    if policy is MatchPolicy.LOW:
        return IdOrder(highest=False)
    if policy is MatchPolicy.HIGH:
        return IdOrder(highest=True)
    return RankOrder(descending=policy is MatchPolicy.HINODE)


@dataclass(frozen=True, slots=True)
class _SlotRequest:
    count: int
    cores: int
    gpus: int
    memory_mib: int
    single_numa: bool = False
    """Its cores, GPUs and memory all from one NUMA zone (``slot -> numanode -> ...``)."""
    aligned: bool = False
    """One NUMA zone on a node whose kubelet enforces ``single-numa-node``
    (:data:`~fluence_core.matcher.jobspec.NUMA_ALIGNED`)."""
    demand: str | None = None
    """The device demand each slot takes on its node, from the graph's
    :class:`~fluence_core.graph.DeviceDemands` registered on it (None: no devices)."""

    def one_zone(self, vertex: NodeVertex) -> bool:
        """Whether on ``vertex`` each slot must come from one NUMA zone."""
        return self.single_numa or (self.aligned and vertex.single_numa_policy)


@dataclass(frozen=True, slots=True)
class _VirtualRequest:
    count: int


@dataclass(frozen=True, slots=True)
class _Request:
    slots: tuple[_SlotRequest, ...]
    virtual: _VirtualRequest | None
    predicate: Predicate
    level: int | None = None
    """The topology level whose one domain must hold the slots (None: anywhere)."""
    hosts: tuple[str, ...] | None = None
    """The few nodes the constraint names at its top, the only ones it can accept (None:
    any node may)."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """One slot entry of one request: what each of its ``slot.count`` pods needs, and where."""

    request: int
    slot: _SlotRequest
    predicate: Predicate


def _chunks(slot: _SlotRequest, vertex: NodeVertex) -> int:
    """Whole memory chunks covering the slot's memory on this node."""
    return -(-slot.memory_mib // vertex.chunk_mib) if slot.memory_mib and vertex.chunk_mib else 0


_UNLIMITED_PODS = 1 << 30


def _range_mask(span: tuple[int, int]) -> int:
    start, stop = span
    return ((1 << stop) - 1) ^ ((1 << start) - 1)


class _NodeState:
    __slots__ = ("vertex", "free_cores", "free_gpus", "free_memory", "free_pods", "usable",
                 "zones")

    def __init__(self, vertex: NodeVertex) -> None:
        self.vertex = vertex
        self.zones = tuple((_range_mask(z.cores), _range_mask(z.gpus), _range_mask(z.memory))
                           for z in vertex.zones)
        """Each NUMA zone's core, GPU and memory chunk ids, as bitmasks."""
        self.free_cores = (1 << vertex.cores) - 1
        self.free_gpus = (1 << vertex.gpus) - 1
        self.free_memory = (1 << vertex.memory_chunks) - 1
        self.free_pods = vertex.max_pods or _UNLIMITED_PODS
        """Slots the kubelet still admits (allocatable ``pods``): every slot is one pod."""
        self.usable = not vertex.down


_Mask = tuple[int, int, int, int, int, int]
"""(node position, cores, GPUs, memory chunks as bitmasks, pods, the token of the devices
taken with them or 0)"""


@dataclass(slots=True)
class _Held:
    """An allocation in the matcher's own terms: masks per node position, virtual roots."""

    allocation: Allocation
    masks: list[_Mask]
    virtual: list[int]


def _take_bits(mask: int, count: int, highest: bool) -> int:
    """The ``count`` lowest (or highest) set bits of ``mask``, as a mask."""
    if count <= 0:
        return 0
    if mask.bit_count() == count:
        return mask
    taken = 0
    if highest:
        while count:
            bit = 1 << (mask.bit_length() - 1)
            taken |= bit
            mask ^= bit
            count -= 1
        return taken
    while count:
        bit = mask & -mask
        taken |= bit
        mask ^= bit
        count -= 1
    return taken


def _zone_for(state: _NodeState, slot: _SlotRequest) -> int | None:
    """The NUMA zone of the node that holds the whole slot, best fit (the fewest free cores,
    then GPUs, so whole zones stay free for bigger pods); None when none does (or the node
    publishes no zones: one NUMA node cannot be promised there)."""
    chunks = _chunks(slot, state.vertex)
    best: tuple[int, int, int] | None = None
    for number, (cores, gpus, memory) in enumerate(state.zones):
        free_cores = (state.free_cores & cores).bit_count()
        free_gpus = (state.free_gpus & gpus).bit_count()
        if (free_cores >= slot.cores and free_gpus >= slot.gpus
                and (state.free_memory & memory).bit_count() >= chunks):
            key = (free_cores, free_gpus, number)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


def _bit_indexes(mask: int) -> tuple[int, ...]:
    if mask == 0:
        return ()
    low = (mask & -mask).bit_length() - 1
    count = mask.bit_count()
    if mask >> low == (1 << count) - 1:
        return tuple(range(low, low + count))
    indexes = []
    while mask:
        bit = mask & -mask
        indexes.append(bit.bit_length() - 1)
        mask ^= bit
    return tuple(indexes)


@dataclass(slots=True)
class _Found:
    """Compute slots deducted for a group: (shape, mask) per pod, or ``None``."""

    masks: list[tuple[int, _Mask]] | None
    exhausted: bool


@dataclass(slots=True)
class _Placed:
    """Every request held, or the index of the one that stopped the group."""

    held: list[_Held] | None
    refused: int | None
    exhausted: bool


class EmbeddedMatcher:
    """A fast pure-Python matcher over a :class:`ResourceGraph`.

    A group's jobspecs are matched together (:meth:`match_allocate_all`), so
    the pods of several shapes are placed by one search (see :mod:`.search`
    for its bound, ``search_budget``), not one shape after another.
    """

    name = "embedded"
    matches_devices = True
    """A slot may name a device demand (:data:`~fluence_core.matcher.jobspec.DEVICE_DEMAND`):
    it fits a node only where the demand's devices do, taken in the same search."""

    def __init__(
        self,
        graph: ResourceGraph,
        policy: MatchPolicy | str = MatchPolicy.FIRST,
        *,
        search_budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.graph = graph
        self.policy = MatchPolicy(policy)
        self.search_budget = search_budget
        self._descending = self.policy in _HIGH_IDS
        self._high_ids = self.policy in _HIGH_IDS
        self._states: list[_NodeState] = []
        self._position: dict[str, int] = {}
        self._order = _node_order(self.policy)
        self._level_types = {level.type: i for i, level in enumerate(graph.levels)}
        self._domains = _Domains(len(graph.levels))
        self._within: list[int] | None = None
        """While a domain is searched: its node positions, ascending."""
        self.last_domain: tuple[str, ...] | None = None
        """The domain the last match with a topology level went to."""
        for vertex in graph.nodes:
            self._append(_NodeState(vertex))
        self._held_below = [0] * len(graph.virtual)
        self._held_virtual = [False] * len(graph.virtual)
        self._jobs: dict[int, _Held] = {}
        self._next_jobid = 1
        self._pristine: EmbeddedMatcher | None = None
        self._count_devices = True
        """Whether slots naming a device demand take it (not on the pristine copy)."""
        self.last_outcome: MatchOutcome | None = None

    # -- the Matcher protocol ------------------------------------------------

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        placed = self.match_allocate_all([jobspec])
        return None if isinstance(placed, GroupRefusal) else placed[0]

    def match_allocate_all(
        self, jobspecs: Sequence[Mapping[str, Any]]
    ) -> list[Allocation] | GroupRefusal:
        """Hold every jobspec or none, placing the compute slots of all of them jointly."""
        requests = [self._parse(jobspec) for jobspec in jobspecs]
        jobids = list(range(self._next_jobid, self._next_jobid + len(requests)))
        self._next_jobid += len(requests)
        placed = self._place_all(requests, jobids)
        if placed.held is None:
            refused = placed.refused or 0
            if placed.exhausted or self._satisfiable(requests):
                outcome = MatchOutcome.BUSY
            else:
                alone = [i for i, r in enumerate(requests) if not self._satisfiable([r])]
                refused = alone[0] if alone else refused
                outcome = MatchOutcome.UNSATISFIABLE
            self.last_outcome = outcome
            return GroupRefusal(refused, outcome)
        self.last_outcome = None
        for held in placed.held:
            self._jobs[held.allocation.jobid] = held
        return [held.allocation for held in placed.held]

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool:
        return self._satisfiable([self._parse(jobspec)])

    def cancel(self, jobid: int) -> bool:
        held = self._jobs.pop(jobid, None)
        if held is None:
            return False
        self._release(held)
        return True

    def restore(self, allocation: Allocation) -> None:
        """Hold a recorded allocation again; refuses one that overlaps what is held."""
        if allocation.jobid in self._jobs:
            raise MatcherError(f"job {allocation.jobid} is already held")
        masks = []
        for share in allocation.nodes:
            if share.node not in self._position:
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: node {share.node} is unknown"
                )
            position = self._position[share.node]
            state = self._states[position]
            cores = sum(1 << i for i in share.cores)
            gpus = sum(1 << i for i in share.gpus)
            memory = sum(1 << i for i in share.memory)
            if (state.free_cores & cores) != cores or (state.free_gpus & gpus) != gpus or (
                state.free_memory & memory
            ) != memory:
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: "
                    f"resources on {share.node} are already held"
                )
            masks.append((position, cores, gpus, memory, share.pods or 1, 0))
        by_path = {v.path: v.index for v in self.graph.virtual}
        virtual = []
        for held_vertex in allocation.virtual:
            index = by_path.get(held_vertex.path)
            if index is None:
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: no virtual vertex {held_vertex.path}"
                )
            if not self._virtual_free(index):
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: {held_vertex.path} is already held"
                )
            virtual.append(index)
        held = _Held(allocation, masks, virtual)
        self._hold(held)
        self._jobs[allocation.jobid] = held
        self._next_jobid = max(self._next_jobid, allocation.jobid + 1)

    def add_node(self, node: NodeInfo) -> None:
        vertex = self.graph.add_node(node)
        if vertex is None:
            return
        self._append(_NodeState(vertex))
        self._pristine = None

    def _append(self, state: _NodeState) -> None:
        position = len(self._states)
        self._position[state.vertex.name] = position
        self._states.append(state)
        self._order.add(state.free_cores, state.usable)
        self._domains.add(position, state.vertex.domains)
        self._account(position, 1)

    def remove_node(self, name: str) -> None:
        """Take the node out of matching; allocations on it stay until cancelled."""
        self.graph.remove_node(name)
        position = self._position.pop(name)
        state = self._states[position]
        self._account(position, -1)
        state.usable = False
        self._order.update(position, state.free_cores, False)
        self._pristine = None

    def set_node_down(self, name: str, down: bool = True) -> None:
        self.graph.set_down(name, down)
        position = self._position[name]
        state = self._states[position]
        self._account(position, -1)
        state.usable = not down
        self._account(position, 1)
        self._order.update(position, state.free_cores, state.usable)
        self._pristine = None

    def allocations(self) -> Mapping[int, Allocation]:
        return {jobid: held.allocation for jobid, held in self._jobs.items()}

    # -- parsing ---------------------------------------------------------------

    def _parse(self, jobspec: Mapping[str, Any]) -> _Request:
        if jobspec.get("version") != 1:
            raise MatcherError(f"unsupported jobspec version {jobspec.get('version')!r}")
        system = (jobspec.get("attributes") or {}).get("system") or {}
        predicate = compile_constraint(system.get("constraints"))
        named = few_hosts(system.get("constraints"), self._named_limit())
        slots: list[_SlotRequest] = []
        virtual: _VirtualRequest | None = None
        entries = jobspec.get("resources") or []
        level: int | None = None
        if len(entries) == 1 and entries[0].get("type") in self._level_types:
            outer = entries[0]
            if int(outer.get("count", 1)) != 1:
                raise MatcherError(
                    f"the embedded matcher holds a group in one {outer['type']}: count must be 1"
                )
            level = self._level_types[outer["type"]]
            entries = outer.get("with") or []
        for entry in entries:
            if entry.get("type") != "slot":
                raise MatcherError(
                    f"the embedded matcher expects slots at the top, got {entry.get('type')!r}"
                )
            count = int(entry.get("count", 1))
            inner = {child.get("type"): child for child in entry.get("with") or []}
            if "node" in inner:
                node_count = int(inner["node"].get("count", 1))
                virtual = _VirtualRequest(count * node_count)
                continue
            demand: str | None = None
            if DEVICE_TYPE in inner:
                demand = inner.pop(DEVICE_TYPE).get(DEVICE_DEMAND)
                if not isinstance(demand, str) or not demand:
                    raise MatcherError(f"a slot's {DEVICE_TYPE} entry names no "
                                       f"{DEVICE_DEMAND}")
            single_numa = NUMA_TYPE in inner
            if single_numa:
                if len(inner) != 1 or int(inner[NUMA_TYPE].get("count", 1)) != 1:
                    raise MatcherError(f"a slot holds one {NUMA_TYPE} and nothing beside it")
                inner = {child.get("type"): child for child in inner[NUMA_TYPE].get("with") or []}
            unknown = set(inner) - {"core", "gpu", "memory"}
            if unknown:
                raise MatcherError(f"unsupported resource types in a slot: {sorted(unknown)}")
            slots.append(
                _SlotRequest(
                    count=count,
                    cores=int(inner.get("core", {}).get("count", 0)),
                    gpus=int(inner.get("gpu", {}).get("count", 0)),
                    memory_mib=int(inner.get("memory", {}).get("count", 0)),
                    single_numa=single_numa,
                    aligned=bool(system.get(NUMA_ALIGNED)),
                    demand=demand,
                )
            )
        return _Request(tuple(slots), virtual, predicate, level,
                        None if named is None else tuple(named))

    def _named_limit(self) -> int:
        """The longest hostlist searched on its own nodes: a domain's (a rack of 100 nodes,
        one slice of a sliced gang) is walked there, not found by walking the whole graph's
        order past every node before it; a list of a good part of the graph is not, since
        sorting it for every match would cost more than the walk."""
        return max(FEW_HOSTS, len(self._states) // 8)

    # -- placing ---------------------------------------------------------------

    def _place_all(self, requests: Sequence[_Request], jobids: Sequence[int]) -> _Placed:
        """Place every request or none: compute slots jointly, then virtual vertices."""
        shapes = [
            _Shape(index, slot, request.predicate)
            for index, request in enumerate(requests)
            for slot in request.slots
        ]
        level = self._level_of(requests)
        if level is None:
            self._within = self._named(requests)
            try:
                found = self._place_compute(shapes)
            finally:
                self._within = None
        else:
            found = self._place_in_domain(shapes, level)
        if found.masks is None:
            refused = shapes[0].request if shapes else 0
            return _Placed(None, refused, found.exhausted)
        per_request: list[list[_Mask]] = [[] for _ in requests]
        for shape, mask in found.masks:
            per_request[shapes[shape].request].append(mask)
        chosen: list[list[int]] = []
        for index, request in enumerate(requests):
            picked: list[int] = []
            if request.virtual is not None:
                picked = self._choose_virtual(request.virtual.count, request.predicate) or []
                if len(picked) < request.virtual.count:
                    for mask in (m for _, m in found.masks):
                        self._give_back(*mask)
                    for held_before in chosen:
                        for vertex in held_before:
                            self._mark_virtual(vertex, held=False)
                    return _Placed(None, index, False)
                for vertex in picked:
                    self._mark_virtual(vertex, held=True)
            chosen.append(picked)
        held = [
            _Held(self._allocation(jobid, masks, virtual), masks, virtual)
            for jobid, masks, virtual in zip(jobids, per_request, chosen)
        ]
        return _Placed(held, None, False)

    def _place_compute(self, shapes: Sequence[_Shape]) -> _Found:
        """Deduct a node for every slot of every shape, or nothing.

        One shape: the policy's first fit is exact (identical slots fill each
        node to its limit whichever node comes first). Several: first fit,
        most-constrained shape first, then the bounded complete search of
        :mod:`.search` when that misses.
        """
        order = self._constrained_first(shapes) if len(shapes) > 1 else list(range(len(shapes)))
        masks: list[tuple[int, _Mask]] = []
        for index in order:
            shape = shapes[index]
            cursor: int | None = None
            for _ in range(shape.slot.count):
                mask = self._first_fit(shape, cursor)
                if mask is None:
                    for _, taken in masks:
                        self._give_back(*taken)
                    if len(shapes) == 1:
                        return _Found(None, False)
                    return self._search(shapes, order)
                masks.append((index, mask))
                cursor = mask[0]
        return _Found(masks, False)

    def _named(self, requests: Sequence[_Request]) -> list[int] | None:
        """The positions of the few nodes the compute requests name (ascending), or None when
        one of them may go anywhere: a pool's lease names its one node, and walking every
        node before it cost O(nodes) per lease."""
        named: set[int] = set()
        computing = [request for request in requests if request.slots]
        for request in computing:
            if request.hosts is None:
                return None
            named.update(self._position[h] for h in request.hosts if h in self._position)
        return sorted(named) if computing else None

    @staticmethod
    def _level_of(requests: Sequence[_Request]) -> int | None:
        levels = {request.level for request in requests if request.slots}
        if len(levels) > 1:
            raise MatcherError(
                f"the compute jobspecs of one group ask for different topology levels {levels}"
            )
        return levels.pop() if levels else None

    def _place_in_domain(self, shapes: Sequence[_Shape], level: int) -> _Found:
        """Every slot inside one domain of ``level``, domains best fit first (see the module
        docstring), or nothing."""
        cores = sum(shape.slot.cores * shape.slot.count for shape in shapes)
        gpus = sum(shape.slot.gpus * shape.slot.count for shape in shapes)
        domains = self._domains
        fitting = [d for d in domains.at_level[level]
                   if domains.cores[d] >= cores and domains.gpus[d] >= gpus
                   and is_known(domains.key[d])]
        if gpus:
            fitting.sort(key=lambda d: (domains.gpus[d], domains.cores[d], d))
        else:
            fitting.sort(key=lambda d: (domains.cores[d], domains.gpus[d], d))
        exhausted = False
        for domain in fitting:
            narrowed = self._fewest_children(domain, level, cores, gpus)
            for within in (narrowed, domains.members[domain]):
                if within is None:
                    continue
                self._within = within
                try:
                    found = self._place_compute(shapes)
                finally:
                    self._within = None
                if found.masks is not None:
                    self.last_domain = domains.key[domain]
                    return found
                exhausted = exhausted or found.exhausted
        return _Found(None, exhausted)

    def _fewest_children(self, domain: int, level: int, cores: int, gpus: int
                         ) -> list[int] | None:
        """The nodes of the fewest domains one level down (racks in a block) whose free
        totals could hold the group, emptiest first; None when that is all of them, or there
        is no level below. A group bigger than one rack, held to a block, is tried there
        first: searched over the whole block, it took the first nodes with room, often a
        rack more than it needs (a tight block's partly used racks)."""
        domains = self._domains
        if level + 1 >= domains.levels:
            return None
        key = domains.key[domain]
        chosen = fewest_holding([c for c in domains.at_level[level + 1]
                                 if domains.key[c][: level + 1] == key],
                                lambda c: (domains.cores[c], domains.gpus[c]), cores, gpus)
        if chosen is None:
            return None
        return sorted(p for child in chosen for p in domains.members[child])

    def _candidates(self, cores: int, cursor: int | None) -> Iterator[int]:
        """Node positions with ``cores`` free in policy order from ``cursor`` on: the whole
        graph's, or only the domain being searched."""
        within = self._within
        if within is None:
            return self._order.candidates(cores, cursor)
        states = self._states
        if not isinstance(self._order, RankOrder):
            return iter(self._by_free_core_id(within, cores))
        if self.policy is MatchPolicy.HINODE:
            end = len(within) if cursor is None else bisect_right(within, cursor)
            ordered: Iterator[int] = reversed(within[:end])
        else:
            start = 0 if cursor is None else bisect_left(within, cursor)
            ordered = iter(within[start:])
        return (p for p in ordered
                if states[p].usable and states[p].free_cores.bit_count() >= cores)

    def _by_free_core_id(self, within: Sequence[int], cores: int) -> list[int]:
        """The domain's nodes with ``cores`` free in :class:`IdOrder`'s order (lowest, or
        highest, free core id first, then rank), sorted here: filtering the whole graph's
        order by domain would walk every node for every pod."""
        states = self._states
        high = self.policy is MatchPolicy.HIGH
        fit = [p for p in within if states[p].usable and states[p].free_cores
               and states[p].free_cores.bit_count() >= cores]

        def key(position: int) -> tuple[int, int]:
            free = states[position].free_cores
            if high:
                return (-(free.bit_length() - 1), position)
            return ((free & -free).bit_length() - 1, position)

        return sorted(fit, key=key)

    def _search(self, shapes: Sequence[_Shape], order: Sequence[int]) -> _Found:
        placer = _Placer(self, shapes)
        result = search([(i, shapes[i].slot.count) for i in order], placer, self.search_budget)
        if result.exhausted:
            logger.info(
                "embedded matcher: a group of %d shapes was not placed within the search budget "
                "(%d takes); treated as not fitting now", len(shapes), self.search_budget,
            )
        return _Found(result.taken, result.exhausted)

    def _constrained_first(self, shapes: Sequence[_Shape]) -> list[int]:
        """Shapes by how few usable nodes could take one slot now, then by size, largest first."""
        states = self._states if self._within is None else [self._states[p] for p in self._within]

        def key(index: int) -> tuple[int, int, int, int, int]:
            slot = shapes[index].slot
            room = sum(1 for state in states if self._fits(state, shapes[index]))
            return (room, -slot.gpus, -slot.memory_mib, -slot.cores, index)

        return sorted(range(len(shapes)), key=key)

    def _first_fit(self, shape: _Shape, cursor: int | None) -> _Mask | None:
        """The first node in policy order that takes one slot, already deducted."""
        for position in self._candidates(shape.slot.cores, cursor):
            if self._fits(self._states[position], shape):
                return self._take(position, shape.slot)
        return None

    # -- the capacity of one node (the only place that knows what a slot needs) ------

    def _fits(self, state: _NodeState, shape: _Shape) -> bool:
        slot, vertex = shape.slot, state.vertex
        return (
            state.usable
            and state.free_pods > 0
            and state.free_cores.bit_count() >= slot.cores
            and state.free_gpus.bit_count() >= slot.gpus
            and (not slot.memory_mib or vertex.chunk_mib > 0)
            and state.free_memory.bit_count() >= _chunks(slot, vertex)
            and (not slot.one_zone(vertex) or _zone_for(state, slot) is not None)
            and shape.predicate(vertex.name, vertex.properties, vertex.rank)
            and (slot.demand is None or not self._count_devices
                 or self._demands().fits(slot.demand, vertex.name))
        )

    def _demands(self) -> DeviceDemands:
        """The device demands of the match under way (a slot naming one needs them)."""
        demands = self.graph.device_demands
        if demands is None:
            raise MatcherError("a jobspec asks for devices, but no device demands are "
                               "registered on the graph for this match")
        return demands

    def _take(self, position: int, slot: _SlotRequest) -> _Mask:
        state = self._states[position]
        high = self._high_ids
        within = (-1, -1, -1)  # every id
        if slot.one_zone(state.vertex):
            zone = _zone_for(state, slot)
            if zone is None:
                raise MatcherError(f"node {state.vertex.name}: no NUMA zone fits the slot")
            within = state.zones[zone]
        token = 0
        if slot.demand is not None and self._count_devices:
            taken = self._demands().take(slot.demand, state.vertex.name)
            if taken is None:
                raise MatcherError(f"node {state.vertex.name}: the slot's devices do not fit")
            token = taken
        cores = _take_bits(state.free_cores & within[0], slot.cores, high)
        gpus = _take_bits(state.free_gpus & within[1], slot.gpus, high)
        memory = _take_bits(state.free_memory & within[2], _chunks(slot, state.vertex), high)
        state.free_cores ^= cores
        state.free_gpus ^= gpus
        state.free_memory ^= memory
        state.free_pods -= 1
        self._order.update(position, state.free_cores, state.usable)
        if self._domains.levels and state.usable:
            self._domains.shift(position, -cores.bit_count(), -gpus.bit_count())
        return position, cores, gpus, memory, 1, token

    def _free_signature(self, position: int) -> tuple[int, ...]:
        """What :meth:`_fits` reads of a node's free capacity, as counts."""
        state = self._states[position]
        zones = tuple(
            count for c, g, m in state.zones for count in (
                (state.free_cores & c).bit_count(), (state.free_gpus & g).bit_count(),
                (state.free_memory & m).bit_count()))
        return (
            state.free_cores.bit_count(), state.free_gpus.bit_count(),
            state.free_memory.bit_count(), state.vertex.chunk_mib, state.free_pods, *zones,
        )

    def _choose_virtual(self, count: int, predicate: Predicate) -> list[int] | None:
        chosen: list[int] = []
        for index in self._virtual_candidates(predicate):
            chosen.append(index)
            if len(chosen) == count:
                return chosen
        return None

    def _virtual_candidates(self, predicate: Predicate) -> Iterator[int]:
        """Outermost free vertices satisfying the constraint, in policy order.

        A vertex that is busy inside, or fails the constraint, is looked into;
        a held vertex is skipped with its subtree.
        """
        graph = self.graph
        roots = list(graph.virtual_roots)
        if self._descending:
            roots.reverse()
        stack = list(reversed(roots))
        while stack:
            index = stack.pop()
            vertex = graph.virtual[index]
            if self._held_virtual[index] or not self._attached_up(vertex):
                continue
            rank = graph.virtual_rank(vertex)
            if self._held_below[index] == 0 and predicate(vertex.name, vertex.properties, rank):
                yield index
                continue
            children = vertex.children[::-1] if self._descending else vertex.children
            stack.extend(reversed(children))

    def _attached_up(self, vertex: VirtualVertex) -> bool:
        if vertex.attach_to == CLUSTER:
            return True
        position = self._position.get(vertex.attach_to)
        return position is not None and self._states[position].usable

    def _satisfiable(self, requests: Sequence[_Request]) -> bool:
        """Whether the requests fit together on the empty graph (a search that runs
        out of budget answers yes: it did not prove the opposite)."""
        if self._pristine is None:
            self._pristine = EmbeddedMatcher(
                self.graph, self.policy, search_budget=self.search_budget
            )
            self._pristine._count_devices = False  # devices taken now are busy, not absent
        pristine = self._pristine
        placed = pristine._place_all(requests, [0] * len(requests))
        if placed.held is None:
            return placed.exhausted
        for held in placed.held:
            pristine._release(held)
        return True

    # -- bookkeeping -------------------------------------------------------------

    def _give_back(self, position: int, cores: int, gpus: int, memory: int, pods: int,
                   token: int = 0) -> None:
        if token and self._count_devices and self.graph.device_demands is not None:
            self.graph.device_demands.give_back(token)
        state = self._states[position]
        if self._domains.levels and state.usable:
            self._domains.shift(position, (cores & ~state.free_cores).bit_count(),
                                (gpus & ~state.free_gpus).bit_count())
        state.free_cores |= cores
        state.free_gpus |= gpus
        state.free_memory |= memory
        state.free_pods += pods
        self._order.update(position, state.free_cores, state.usable)

    def _hold(self, held: _Held) -> None:
        for position, cores, gpus, memory, pods, _ in held.masks:
            state = self._states[position]
            if self._domains.levels and state.usable:
                self._domains.shift(position, -(cores & state.free_cores).bit_count(),
                                    -(gpus & state.free_gpus).bit_count())
            state.free_cores &= ~cores
            state.free_gpus &= ~gpus
            state.free_memory &= ~memory
            state.free_pods -= pods  # a restore may leave a shrunk node over its limit
            self._order.update(position, state.free_cores, state.usable)
        for index in held.virtual:
            self._mark_virtual(index, held=True)

    def _release(self, held: _Held) -> None:
        for mask in held.masks:
            self._give_back(*mask)
        for index in held.virtual:
            self._mark_virtual(index, held=False)

    def _account(self, position: int, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) a usable node's free capacity to its domains'."""
        state = self._states[position]
        if self._domains.levels and state.usable:
            self._domains.shift(position, sign * state.free_cores.bit_count(),
                                sign * state.free_gpus.bit_count())

    def domain_free(self, level: int) -> dict[tuple[str, ...], tuple[int, int]]:
        """Free (cores, GPUs) of each domain at ``level``, on usable nodes."""
        domains = self._domains
        return {domains.key[d]: (domains.cores[d], domains.gpus[d])
                for d in domains.at_level[level]}

    def _virtual_free(self, index: int) -> bool:
        if self._held_below[index]:
            return False
        parent = self.graph.virtual[index].parent
        while parent is not None:
            if self._held_virtual[parent]:
                return False
            parent = self.graph.virtual[parent].parent
        return True

    def _mark_virtual(self, index: int, *, held: bool) -> None:
        self._held_virtual[index] = held
        delta = 1 if held else -1
        current: int | None = index
        while current is not None:
            self._held_below[current] += delta
            current = self.graph.virtual[current].parent

    def _allocation(self, jobid: int, masks: list[_Mask], virtual: list[int]) -> Allocation:
        merged: dict[int, list[int]] = {}
        for position, cores, gpus, memory, pods, _ in masks:
            entry = merged.setdefault(position, [0, 0, 0, 0])
            entry[0] |= cores
            entry[1] |= gpus
            entry[2] |= memory
            entry[3] += pods
        nodes = []
        for position, (cores, gpus, memory, pods) in merged.items():
            vertex = self._states[position].vertex
            nodes.append(
                NodeShare(
                    node=vertex.name,
                    cores=_bit_indexes(cores),
                    gpus=_bit_indexes(gpus),
                    memory=_bit_indexes(memory),
                    memory_mib=memory.bit_count() * vertex.chunk_mib,
                    pods=pods,
                )
            )
        shares = []
        for index in virtual:
            chosen = self.graph.virtual[index]
            shares.append(
                VirtualShare(
                    path=chosen.path, type=chosen.type, name=chosen.name,
                    backend=chosen.backend, attributes=dict(chosen.attributes),
                )
            )
        return Allocation(jobid=jobid, nodes=tuple(nodes), virtual=tuple(shares))




class _Placer:
    """The embedded matcher's node capacity, as :func:`.search.search` sees it."""

    def __init__(self, matcher: EmbeddedMatcher, shapes: Sequence[_Shape]) -> None:
        self._matcher = matcher
        self._shapes = shapes
        self._by_position = not isinstance(matcher._order, RankOrder)
        self._eligible: dict[int, tuple[bool, ...]] = {}

    def candidates(self, shape: int, after: int | None) -> Iterator[int]:
        # a rank order's cursor already means "this node and those after it"
        for position in self._matcher._candidates(self._shapes[shape].slot.cores, after):
            if after is None or not self._by_position or position >= after:
                yield position

    def take(self, shape: int, position: int) -> _Mask | None:
        matcher = self._matcher
        if not matcher._fits(matcher._states[position], self._shapes[shape]):
            return None
        return matcher._take(position, self._shapes[shape].slot)

    def give_back(self, taken: _Mask) -> None:
        self._matcher._give_back(*taken)

    def signature(self, shape: int, position: int) -> Hashable:
        eligible = self._eligible.get(position)
        if eligible is None:
            vertex = self._matcher._states[position].vertex
            eligible = tuple(
                s.predicate(vertex.name, vertex.properties, vertex.rank) for s in self._shapes
            )
            self._eligible[position] = eligible
        signature = self._matcher._free_signature(position), eligible
        demands = self._matcher.graph.device_demands
        if demands is not None and any(s.slot.demand is not None for s in self._shapes):
            return signature, demands.signature(self._matcher._states[position].vertex.name)
        return signature


class _Domains:
    """The topology domains of the matcher's nodes, by id: their nodes and free capacity."""

    def __init__(self, levels: int) -> None:
        self.levels = levels
        self.ids: dict[tuple[str, ...], int] = {}
        self.key: list[tuple[str, ...]] = []
        self.members: list[list[int]] = []
        """Node positions of each domain, ascending (positions only grow)."""
        self.cores: list[int] = []
        self.gpus: list[int] = []
        self.at_level: list[list[int]] = [[] for _ in range(levels)]
        self.of_node: list[tuple[int, ...]] = []

    def add(self, position: int, domains: tuple[str, ...]) -> None:
        ids = []
        for depth in range(1, len(domains) + 1):
            key = domains[:depth]
            found = self.ids.get(key)
            if found is None:
                found = self.ids[key] = len(self.key)
                self.key.append(key)
                self.members.append([])
                self.cores.append(0)
                self.gpus.append(0)
                self.at_level[depth - 1].append(found)
            self.members[found].append(position)
            ids.append(found)
        self.of_node.append(tuple(ids))

    def shift(self, position: int, cores: int, gpus: int) -> None:
        for domain in self.of_node[position]:
            self.cores[domain] += cores
            self.gpus[domain] += gpus
