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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from fluence_core.errors import MatcherError
from fluence_core.graph import NodeVertex, ResourceGraph, VirtualVertex
from fluence_core.matcher.base import Allocation, MatchOutcome, NodeShare, VirtualShare
from fluence_core.matcher.constraints import Predicate, compile_constraint
from fluence_core.matcher.node_order import IdOrder, NodeOrder, RankOrder
from fluence_core.models import NodeInfo
from fluence_core.resource_config import CLUSTER
from fluence_core.settings import MatchPolicy

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


@dataclass(frozen=True, slots=True)
class _VirtualRequest:
    count: int


@dataclass(frozen=True, slots=True)
class _Request:
    slots: tuple[_SlotRequest, ...]
    virtual: _VirtualRequest | None
    predicate: Predicate


_UNLIMITED_PODS = 1 << 30


class _NodeState:
    __slots__ = ("vertex", "free_cores", "free_gpus", "free_memory", "free_pods", "usable")

    def __init__(self, vertex: NodeVertex) -> None:
        self.vertex = vertex
        self.free_cores = (1 << vertex.cores) - 1
        self.free_gpus = (1 << vertex.gpus) - 1
        self.free_memory = (1 << vertex.memory_chunks) - 1
        self.free_pods = vertex.max_pods or _UNLIMITED_PODS
        """Slots the kubelet still admits (allocatable ``pods``): every slot is one pod."""
        self.usable = not vertex.down


_Mask = tuple[int, int, int, int, int]
"""(node position, cores, GPUs, memory chunks as bitmasks, pods)"""


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


class EmbeddedMatcher:
    """A fast pure-Python matcher over a :class:`ResourceGraph`."""

    name = "embedded"

    def __init__(self, graph: ResourceGraph, policy: MatchPolicy | str = MatchPolicy.FIRST) -> None:
        self.graph = graph
        self.policy = MatchPolicy(policy)
        self._descending = self.policy in _HIGH_IDS
        self._high_ids = self.policy in _HIGH_IDS
        self._states: list[_NodeState] = []
        self._position: dict[str, int] = {}
        self._order = _node_order(self.policy)
        for vertex in graph.nodes:
            self._append(_NodeState(vertex))
        self._held_below = [0] * len(graph.virtual)
        self._held_virtual = [False] * len(graph.virtual)
        self._jobs: dict[int, _Held] = {}
        self._next_jobid = 1
        self._pristine: EmbeddedMatcher | None = None
        self.last_outcome: MatchOutcome | None = None

    # -- the Matcher protocol ------------------------------------------------

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        request = self._parse(jobspec)
        jobid = self._next_jobid
        self._next_jobid += 1
        held = self._place(request, jobid)
        if held is None:
            self.last_outcome = (
                MatchOutcome.BUSY if self._satisfiable(request) else MatchOutcome.UNSATISFIABLE
            )
            return None
        self.last_outcome = None
        self._jobs[jobid] = held
        return held.allocation

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool:
        return self._satisfiable(self._parse(jobspec))

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
                raise MatcherError(f"cannot restore job {allocation.jobid}: node {share.node} is unknown")
            position = self._position[share.node]
            state = self._states[position]
            cores = sum(1 << i for i in share.cores)
            gpus = sum(1 << i for i in share.gpus)
            memory = sum(1 << i for i in share.memory)
            if (state.free_cores & cores) != cores or (state.free_gpus & gpus) != gpus or (
                state.free_memory & memory
            ) != memory:
                raise MatcherError(
                    f"cannot restore job {allocation.jobid}: resources on {share.node} are already held"
                )
            masks.append((position, cores, gpus, memory, share.pods or 1))
        by_path = {v.path: v.index for v in self.graph.virtual}
        virtual = []
        for held_vertex in allocation.virtual:
            index = by_path.get(held_vertex.path)
            if index is None:
                raise MatcherError(f"cannot restore job {allocation.jobid}: no virtual vertex {held_vertex.path}")
            if not self._virtual_free(index):
                raise MatcherError(f"cannot restore job {allocation.jobid}: {held_vertex.path} is already held")
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
        self._position[state.vertex.name] = len(self._states)
        self._states.append(state)
        self._order.add(state.free_cores, state.usable)

    def remove_node(self, name: str) -> None:
        """Take the node out of matching; allocations on it stay until cancelled."""
        self.graph.remove_node(name)
        position = self._position.pop(name)
        state = self._states[position]
        state.usable = False
        self._order.update(position, state.free_cores, False)
        self._pristine = None

    def set_node_down(self, name: str, down: bool = True) -> None:
        self.graph.set_down(name, down)
        position = self._position[name]
        state = self._states[position]
        state.usable = not down
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
        slots: list[_SlotRequest] = []
        virtual: _VirtualRequest | None = None
        for entry in jobspec.get("resources") or []:
            if entry.get("type") != "slot":
                raise MatcherError(f"the embedded matcher expects slots at the top, got {entry.get('type')!r}")
            count = int(entry.get("count", 1))
            inner = {child.get("type"): child for child in entry.get("with") or []}
            if "node" in inner:
                node_count = int(inner["node"].get("count", 1))
                virtual = _VirtualRequest(count * node_count)
                continue
            unknown = set(inner) - {"core", "gpu", "memory"}
            if unknown:
                raise MatcherError(f"unsupported resource types in a slot: {sorted(unknown)}")
            slots.append(
                _SlotRequest(
                    count=count,
                    cores=int(inner.get("core", {}).get("count", 0)),
                    gpus=int(inner.get("gpu", {}).get("count", 0)),
                    memory_mib=int(inner.get("memory", {}).get("count", 0)),
                )
            )
        return _Request(tuple(slots), virtual, predicate)

    # -- placing ---------------------------------------------------------------

    def _place(self, request: _Request, jobid: int) -> _Held | None:
        masks: list[_Mask] = []
        virtual: list[int] = []
        ok = True
        for slot in request.slots:
            cursor: int | None = None
            for _ in range(slot.count):
                found = self._place_slot(slot, request.predicate, cursor)
                if found is None:
                    ok = False
                    break
                masks.append(found)
                cursor = found[0]
            if not ok:
                break
        if ok and request.virtual is not None:
            chosen = self._choose_virtual(request.virtual.count, request.predicate)
            if chosen is None:
                ok = False
            else:
                virtual = chosen
        if not ok:
            for mask in masks:
                self._give_back(*mask)
            return None
        for index in virtual:
            self._mark_virtual(index, held=True)
        return _Held(self._allocation(jobid, masks, virtual), masks, virtual)

    def _place_slot(
        self, slot: _SlotRequest, predicate: Predicate, cursor: int | None
    ) -> _Mask | None:
        """Find a node for one slot and take its resources (already deducted on return)."""
        need = slot.cores
        for position in self._order.candidates(need, cursor):
            state = self._states[position]
            vertex = state.vertex
            chunks = -(-slot.memory_mib // vertex.chunk_mib) if slot.memory_mib else 0
            if (
                state.free_pods > 0
                and state.free_gpus.bit_count() >= slot.gpus
                and state.free_memory.bit_count() >= chunks
                and (not slot.memory_mib or vertex.chunk_mib > 0)
                and predicate(vertex.name, vertex.properties, vertex.rank)
            ):
                high = self._high_ids
                cores = _take_bits(state.free_cores, need, high)
                gpus = _take_bits(state.free_gpus, slot.gpus, high)
                memory = _take_bits(state.free_memory, chunks, high)
                state.free_cores ^= cores
                state.free_gpus ^= gpus
                state.free_memory ^= memory
                state.free_pods -= 1
                self._order.update(position, state.free_cores, state.usable)
                return position, cores, gpus, memory, 1
        return None

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

    def _satisfiable(self, request: _Request) -> bool:
        if self._pristine is None:
            self._pristine = EmbeddedMatcher(self.graph, self.policy)
        pristine = self._pristine
        held = pristine._place(request, 0)
        if held is None:
            return False
        pristine._release(held)
        return True

    # -- bookkeeping -------------------------------------------------------------

    def _give_back(self, position: int, cores: int, gpus: int, memory: int, pods: int) -> None:
        state = self._states[position]
        state.free_cores |= cores
        state.free_gpus |= gpus
        state.free_memory |= memory
        state.free_pods += pods
        self._order.update(position, state.free_cores, state.usable)

    def _hold(self, held: _Held) -> None:
        for position, cores, gpus, memory, pods in held.masks:
            state = self._states[position]
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
        for position, cores, gpus, memory, pods in masks:
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


