"""The resource graph: the cluster's nodes plus the virtual resources, Fluxion-shaped.

The shape is Fluxion's: a root ``cluster``; the topology levels, if any
(:mod:`fluence_core.topology`: one vertex per domain, ``cluster0 -> zone -> rack``); a
``node`` vertex per node (``virtual=false``) under its narrowest domain, holding one
vertex per core, per GPU and per memory chunk; and every virtual resource, at every
level, a ``node``-typed vertex
(Fluxion applies property constraints only to node vertices) carrying
``virtual=true``, ``class=<t>`` for its own and every descendant type, and its
attributes as key-only properties.

DRA devices are vertices too (:class:`DeviceVertex`, type ``device``), read from the
devices the scheduler watches (its ``devices`` source, the one table of them): a
node-local device under its node, a network-attached one above the nodes it serves,
under the narrowest domain holding them all (the cluster when it serves every node).

Paths have no fixed depth: :meth:`ResourceGraph.node_path` is the one place a node's
path is made, and nothing else may assume where a node sits.

Cores, GPUs and memory chunks are *counted* here rather than stored as objects:
a 1000-node, 64-core cluster would otherwise mean 130,000 Python objects to
build and walk. :meth:`ResourceGraph.to_jgf` expands them when Fluxion needs
the full vertex list.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Iterator, KeysView, Protocol, Sequence

from fluence_core import names
from fluence_core.log import logger
from fluence_core.models import NodeInfo
from fluence_core.numa import ZoneLoad, shares, spans
from fluence_core.resource_config import CLUSTER, ResourceConfig, VirtualResource
from fluence_core.settings import Settings
from fluence_core.topology import Level, choose_levels, domains_of, is_known

_RANK = operator.attrgetter("rank")
_NAME = operator.attrgetter("name")

ROOT = "cluster0"
NUMA_TYPE = "numanode"
"""The vertex type of a NUMA zone (Fluxion's own name for it)."""
ROOT_PATH = f"/{ROOT}"
DEVICE_TYPE = "device"
"""The vertex type of a DRA device."""
Domain = tuple[str, ...]
"""A topology domain: its name at each level from the widest down to its own."""


def levels_for(config: ResourceConfig, settings: Settings) -> tuple[Level, ...]:
    """The topology levels a graph gets: the resources file's or ``FLUENCE_TOPOLOGY_LEVELS``
    (both set and different: :class:`~fluence_core.errors.TopologyError`, at start)."""
    return choose_levels(config.levels, settings.graph.levels, config.source,
                         f"{names.SETTINGS_ENV_PREFIX}TOPOLOGY_LEVELS")


@dataclass(frozen=True, slots=True)
class ZoneSpan:
    """One NUMA zone of a node: its name and the id ranges ``[start, stop)`` it holds."""

    name: str
    cores: tuple[int, int]
    gpus: tuple[int, int]
    memory: tuple[int, int]

    def span(self, kind: str) -> tuple[int, int]:
        return {"core": self.cores, "gpu": self.gpus, "memory": self.memory}[kind]


@dataclass(slots=True)
class NodeVertex:
    """A real node: its rank and counts of cores, GPUs and memory chunks."""

    name: str
    rank: int
    cores: int
    gpus: int
    memory_chunks: int
    chunk_mib: int
    properties: frozenset[str]
    labels: dict[str, str] = field(default_factory=dict)
    down: bool = False
    max_pods: int = 0
    millicores: int = 0
    """Allocatable CPU in millicores; what the cores leave is the shared pool's from the start."""
    memory_mib: int = 0
    """Allocatable memory in MiB; what the chunks leave is the shared pool's from the start."""
    schedulable: bool = True
    """Not cordoned nor NoSchedule/NoExecute-tainted. Such a node stays in the graph (a
    pod tolerating it may use it); who may is Kubernetes' filters' answer, not the graph's."""
    domains: Domain = ()
    """Its domain's name at each topology level, widest first (the unknown domain where it
    lacks the level's label)."""
    zones: tuple[ZoneSpan, ...] = ()
    """Its NUMA zones (from its NodeResourceTopology), each holding a range of its core,
    GPU and memory chunk ids; none when it publishes none."""
    single_numa_policy: bool = False
    """Its kubelet's topology manager enforces ``single-numa-node``."""

    def zones_loaded(self, load: ZoneLoad) -> bool:
        """Whether a JGF written with ``load`` holds this node's zones as vertices."""
        return bool(self.zones) and (load is ZoneLoad.ALL
                                     or (load is ZoneLoad.POLICY and self.single_numa_policy))

    def zone_of(self, kind: str, index: int) -> int | None:
        """The zone holding vertex ``<kind><index>`` (``core``, ``gpu``, ``memory``)."""
        for number, zone in enumerate(self.zones):
            start, stop = zone.span(kind)
            if start <= index < stop:
                return number
        return None

    def domain(self, level: int) -> Domain:
        """The domain holding this node at ``level`` (0 is the widest)."""
        return self.domains[: level + 1]


@dataclass(slots=True)
class VirtualVertex:
    """One instance of a virtual resource (a ``node``-typed vertex in Fluxion's eyes)."""

    index: int
    type: str
    basename: str
    instance: int
    parent: int | None
    attach_to: str
    backend: str
    attributes: dict[str, str]
    properties: frozenset[str]
    path: str
    children: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.basename}{self.instance}"


@dataclass(frozen=True, slots=True)
class DeviceVertex:
    """One DRA device as a vertex: its driver, pool and name, its attributes, where it
    hangs, and the claim holding it (None: free)."""

    driver: str
    pool: str
    device: str
    node: str | None
    """Its node, for a node-local device (the vertex hangs under it)."""
    reaches: tuple[str, ...]
    """The graph's nodes a network-attached device serves (empty for a node-local one)."""
    attributes: tuple[tuple[str, str], ...]
    """``(domain/name, value)`` pairs, as text."""
    held_by: str | None = None
    """``namespace/name`` of the claim holding it, or None when it is free."""
    offered: bool = True
    """False for a device Fluence does not allocate (a feature it does not model)."""

    @property
    def name(self) -> str:
        """``driver/pool/device``, as an allocation result names it."""
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def vertex_name(self) -> str:
        """Its vertex's name, one path component (``driver:pool:device``)."""
        return f"{self.driver}:{self.pool}:{self.device}"


class DeviceSource(Protocol):
    """Where the graph reads its device vertices from (the scheduler's DRA state)."""

    def device_vertices(self, graph: ResourceGraph) -> Sequence[DeviceVertex]:
        """Every device of a complete pool, as a vertex of ``graph``."""
        ...


class DeviceDemands(Protocol):
    """The devices a match may take for the slots that ask for them, during one match.

    A slot's jobspec names a *demand* (the claims of one pod, by their specification);
    the matcher asks whether it fits on a node beside what the match holds so far, takes
    it (a token names what was taken) and gives it back when it backtracks."""

    def fits(self, demand: str, node: str) -> bool: ...

    def take(self, demand: str, node: str) -> int | None:
        """Take the demand's devices on ``node``; a token, or None when they do not fit."""
        ...

    def give_back(self, token: int) -> None: ...

    def signature(self, node: str) -> Hashable:
        """Equal for two nodes only when no demand can tell them apart."""
        ...


class ResourceGraph:
    """Nodes and virtual resources, changeable node by node without a rebuild."""

    def __init__(
        self,
        nodes: Iterable[NodeInfo] = (),
        config: ResourceConfig | None = None,
        *,
        memory_chunks_per_core: int = 1,
        levels: Iterable[Level] | None = None,
    ) -> None:
        self.config = config or ResourceConfig()
        self.levels: tuple[Level, ...] = (
            tuple(levels) if levels is not None else self.config.levels
        )
        """Topology levels, widest first: the config's unless given."""
        self.memory_chunks_per_core = memory_chunks_per_core
        self._nodes: dict[str, NodeVertex] = {}
        self._next_rank = 0
        self._covering: tuple[frozenset[str], int] | None = None
        """The last set :meth:`covered_by` said holds every node, and the rank counter then
        (it moves whenever a node comes; a node that goes only makes the answer truer)."""
        self.virtual: list[VirtualVertex] = []
        self.virtual_roots: list[int] = []
        self.devices: DeviceSource | None = None
        """The DRA devices, read as vertices when asked (:meth:`device_vertices`)."""
        self.device_demands: DeviceDemands | None = None
        """During a match whose slots ask for devices: what they may take."""
        known: set[str] = set()
        for node in nodes:
            known.add(node.name)
            self.add_node(node)
        self.config.check_parents(known)
        self._build_virtual()

    # -- nodes ---------------------------------------------------------------

    @property
    def nodes(self) -> list[NodeVertex]:
        """Nodes in rank order."""
        return list(self._nodes.values())

    @property
    def node_names(self) -> KeysView[str]:
        """The nodes' names in rank order, a live view (a set test against it runs in C)."""
        return self._nodes.keys()

    def covered_by(self, names: frozenset[str]) -> bool:
        """Whether every node of the graph is in ``names``.

        Remembered for the last set that was: the pods of one shape share one set of
        feasible nodes, so a backlog asks about the same set again and again, and a test
        of five thousand names per pod grew with pods x nodes.
        """
        last = self._covering
        if last is not None and last[0] is names and last[1] == self._next_rank:
            return True
        covered = len(names) >= len(self._nodes) and self._nodes.keys() <= names
        if covered:
            self._covering = (names, self._next_rank)
        return covered

    def node(self, name: str) -> NodeVertex:
        return self._nodes[name]

    def in_rank_order(self, wanted: Iterable[str]) -> list[str]:
        """Those of ``wanted`` that are nodes of the graph, in rank order (each lone pod's
        few hundred feasible nodes are sorted so: no Python call per name)."""
        nodes = self._nodes
        found = list(map(nodes.__getitem__, filter(nodes.__contains__, wanted)))
        found.sort(key=_RANK)
        return list(map(_NAME, found))

    def has_node(self, name: str) -> bool:
        return name in self._nodes

    def add_node(self, info: NodeInfo) -> NodeVertex:
        """Add a node; cordoned and tainted ones too (a tolerating pod may use them)."""
        if info.name in self._nodes:
            raise ValueError(f"node {info.name} is already in the graph")
        chunks = info.cores * self.memory_chunks_per_core
        chunk_mib = info.memory_mib // chunks if chunks else 0
        properties = {names.VIRTUAL_FALSE}
        zone = info.labels.get(names.ZONE_LABEL)
        if zone:
            properties.add(f"zone={zone}")
        vertex = NodeVertex(
            name=info.name,
            rank=self._next_rank,
            cores=info.cores,
            gpus=info.gpus,
            memory_chunks=chunks if chunk_mib else 0,
            chunk_mib=chunk_mib,
            properties=frozenset(properties),
            labels=dict(info.labels),
            max_pods=info.max_pods,
            schedulable=info.schedulable,
            millicores=info.millicores or info.cores * 1000,
            memory_mib=info.memory_mib,
            domains=domains_of(self.levels, info.labels),
            zones=_zones(info, chunks if chunk_mib else 0, self.memory_chunks_per_core),
            single_numa_policy=bool(info.numa and info.numa.single_numa_policy),
        )
        self._next_rank += 1
        self._nodes[info.name] = vertex
        return vertex

    def remove_node(self, name: str) -> NodeVertex:
        """Take a node out; its rank is never reused."""
        attached = [v.name for v in self.virtual if v.attach_to == name and v.parent is None]
        if attached:
            raise ValueError(f"node {name} hosts virtual resources {attached}; cannot remove it")
        return self._nodes.pop(name)

    def set_down(self, name: str, down: bool = True) -> None:
        self._nodes[name].down = down

    # -- topology --------------------------------------------------------------

    def node_path(self, name: str) -> str:
        """The containment path of a node's vertex: under its narrowest domain."""
        return f"{self.domain_path(self._nodes[name].domains)}/{name}"

    def vertex_path(self, name: str, kind: str, index: int, *,
                    numa: ZoneLoad = ZoneLoad.ALL) -> str:
        """The containment path of core, GPU or memory chunk ``index`` of node ``name``: under
        its NUMA zone's vertex when the JGF written with ``numa`` holds the node's zones
        (:meth:`jgf_text`); the one place that knows."""
        node = self._nodes[name]
        zone = node.zone_of(kind, index) if node.zones_loaded(numa) else None
        under = self.node_path(name) + ("" if zone is None else f"/{NUMA_TYPE}{zone}")
        return f"{under}/{kind}{index}"

    @staticmethod
    def domain_path(domain: Domain) -> str:
        """The containment path of a domain's vertex (the root's for no domain)."""
        return "/".join((ROOT_PATH, *domain))

    def domains(self, level: int, *, known_only: bool = True) -> dict[Domain, list[NodeVertex]]:
        """The nodes of each domain at ``level``, domains in first-seen order (only those
        named by the level's own label unless ``known_only`` is false)."""
        found: dict[Domain, list[NodeVertex]] = {}
        for node in self._nodes.values():
            domain = node.domains[: level + 1]
            if known_only and not is_known(domain):
                continue
            found.setdefault(domain, []).append(node)
        return found

    def all_domains(self) -> list[Domain]:
        """Every domain at every level, each after its parent (first-seen order)."""
        seen: dict[Domain, None] = {}
        for node in self._nodes.values():
            for depth in range(1, len(node.domains) + 1):
                seen.setdefault(node.domains[:depth], None)
        return list(seen)

    def common_domain(self, nodes: Iterable[str]) -> Domain:
        """The narrowest domain holding every one of ``nodes`` (``()``: only the cluster)."""
        common: Domain | None = None
        for name in nodes:
            own = self._nodes[name].domains
            if common is None:
                common = own
                continue
            depth = 0
            while depth < len(common) and common[depth] == own[depth]:
                depth += 1
            common = common[:depth]
        return common or ()

    # -- virtual resources -----------------------------------------------------

    def _build_virtual(self) -> None:
        for resource in self.config.resources:
            if resource.parent != CLUSTER and resource.parent not in self._nodes:
                logger.warning(
                    "%s: %s hangs under node %s, which is cordoned or tainted: left out until the "
                    "graph is rebuilt", self.config.source, resource.path, resource.parent,
                )
                continue
            for i in range(resource.count):
                self.virtual_roots.append(
                    self._add_virtual(resource, i, None, resource.parent, backend=resource.name)
                )

    def _add_virtual(
        self,
        resource: VirtualResource,
        instance: int,
        parent: int | None,
        attach_to: str,
        backend: str,
    ) -> int:
        properties = {names.VIRTUAL_TRUE, names.attribute_property("backend", backend)}
        properties.update(names.class_property(t) for t in resource.types())
        properties.update(names.attribute_property(k, v) for k, v in resource.attributes.items())
        if parent is not None:
            base = self.virtual[parent].path
        else:
            base = ROOT_PATH if attach_to == CLUSTER else self.node_path(attach_to)
        vertex = VirtualVertex(
            index=len(self.virtual),
            type=resource.type,
            basename=resource.name,
            instance=instance,
            parent=parent,
            attach_to=attach_to,
            backend=backend,
            attributes=dict(resource.attributes),
            properties=frozenset(properties),
            path=f"{base}/{resource.name}{instance}",
        )
        self.virtual.append(vertex)
        for child in resource.children:
            for j in range(child.count):
                vertex.children.append(
                    self._add_virtual(child, j, vertex.index, attach_to, backend)
                )
        return vertex.index

    def virtual_subtree(self, index: int) -> Iterator[int]:
        """The vertex and its descendants, depth first."""
        stack = [index]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(reversed(self.virtual[current].children))

    def virtual_rank(self, vertex: VirtualVertex) -> int:
        """The rank of the node a virtual vertex hangs under, -1 under the cluster."""
        return -1 if vertex.attach_to == CLUSTER else self._nodes[vertex.attach_to].rank

    @property
    def virtual_types(self) -> set[str]:
        return {v.type for v in self.virtual}

    # -- DRA devices -------------------------------------------------------------

    def device_vertices(self) -> Sequence[DeviceVertex]:
        """The DRA devices as vertices (none without a source)."""
        return self.devices.device_vertices(self) if self.devices is not None else ()

    def device_parent(self, device: DeviceVertex) -> str:
        """The path a device vertex hangs under: its node's, or the narrowest domain's
        holding every node it serves (the cluster's when none is in the graph)."""
        if device.node is not None:
            return self.node_path(device.node) if device.node in self._nodes else ROOT_PATH
        reached = [name for name in device.reaches if name in self._nodes]
        return self.domain_path(self.common_domain(reached)) if reached else ROOT_PATH

    def device_path(self, device: DeviceVertex) -> str:
        """The containment path of a device vertex."""
        return f"{self.device_parent(device)}/{device.vertex_name}"

    # -- summaries -------------------------------------------------------------

    def vertex_count(self) -> int:
        """How many vertices the JGF export holds (cluster, domains, nodes, cores, GPUs,
        memory, virtual)."""
        per_node = sum(1 + len(n.zones) + n.cores + n.gpus + n.memory_chunks
                       for n in self._nodes.values())
        return (1 + len(self.all_domains()) + per_node + len(self.virtual)
                + len(self.device_vertices()))

    def summary(self) -> dict[str, int]:
        nodes = self._nodes.values()
        found = {
            "nodes": len(self._nodes),
            "cores": sum(n.cores for n in nodes),
            "gpus": sum(n.gpus for n in nodes),
            "memory_mib": sum(n.memory_chunks * n.chunk_mib for n in nodes),
            "virtual": len(self.virtual),
        }
        devices = len(self.device_vertices())
        if devices:  # DRA devices, counted only where there are some
            found["devices"] = devices
        found["vertices"] = self.vertex_count()
        return found

    # -- JGF -------------------------------------------------------------------

    def to_jgf(self, *, numa: ZoneLoad = ZoneLoad.ALL, devices: bool = True) -> dict[str, Any]:
        """The graph as JSON Graph Format that Fluxion's ``reapi_cli`` loads (see
        :meth:`jgf_text`, its one serialisation)."""
        parsed: dict[str, Any] = json.loads(self.jgf_text(numa=numa, devices=devices))
        return parsed

    def jgf_text(self, *, numa: ZoneLoad = ZoneLoad.ALL, devices: bool = True) -> str:
        """The JGF as compact JSON text, written directly (a 1000 x 64-core graph has 129,000
        vertices; building dicts and encoding them took seconds). On a node whose zones
        ``numa`` loads (:meth:`NodeVertex.zones_loaded`) its cores, GPUs and memory hang
        under one ``numanode`` vertex per NUMA zone; elsewhere, under the node itself.

        With ``devices``, the DRA devices are ``device`` vertices (:meth:`_write_devices`).
        Ids are strings, every property value is a string, and each vertex
        carries ``type/basename/name/id/uniq_id/rank/exclusive/unit/size/paths``.
        """
        writer = _JgfWriter()
        root = writer.vertex("cluster", "cluster", 0, -1, ROOT_PATH, name=ROOT)
        domain_uid: dict[Domain, int] = {(): root}
        per_type: dict[str, int] = {}
        for domain in self.all_domains():
            vtype = self.levels[len(domain) - 1].type
            ordinal = per_type[vtype] = per_type.get(vtype, -1) + 1
            uid = writer.vertex(vtype, vtype, ordinal, -1, self.domain_path(domain),
                                name=domain[-1])
            writer.edge(domain_uid[domain[:-1]], uid)
            domain_uid[domain] = uid
        node_uid: dict[str, int] = {}
        for node in self._nodes.values():
            path = self.node_path(node.name)
            uid = writer.vertex(
                "node", node.name, node.rank, node.rank, path, name=node.name,
                properties=node.properties,
            )
            writer.edge(domain_uid[node.domains], uid)
            node_uid[node.name] = uid
            whole = ZoneSpan("", (0, node.cores), (0, node.gpus), (0, node.memory_chunks))
            zones: list[tuple[int | None, ZoneSpan]] = (
                list(enumerate(node.zones)) if node.zones_loaded(numa) else [])
            for number, zone in zones or [(None, whole)]:
                parent, under = uid, path
                if number is not None:
                    under = f"{path}/{NUMA_TYPE}{number}"
                    parent = writer.vertex(NUMA_TYPE, NUMA_TYPE, number, node.rank, under)
                    writer.edge(uid, parent)
                writer.children(parent, "core", zone.cores, node.rank, under)
                writer.children(parent, "gpu", zone.gpus, node.rank, under)
                writer.children(parent, "memory", zone.memory, node.rank, under,
                                size=node.chunk_mib, unit="MiB")
        virtual_uid: dict[int, int] = {}
        for vertex in self.virtual:
            if vertex.parent is not None:
                parent_uid = virtual_uid[vertex.parent]
            else:
                parent_uid = root if vertex.attach_to == CLUSTER else node_uid[vertex.attach_to]
            uid = writer.vertex(
                "node", vertex.basename, vertex.instance, self.virtual_rank(vertex), vertex.path,
                properties=vertex.properties,
            )
            writer.edge(parent_uid, uid)
            virtual_uid[vertex.index] = uid
        if devices:
            self._write_devices(writer, domain_uid, node_uid)
        return writer.text()

    def _write_devices(self, writer: _JgfWriter, domain_uid: dict[Domain, int],
                       node_uid: dict[str, int]) -> None:
        """One ``device`` vertex per offered DRA device, under its node or above the nodes
        it serves; its driver, pool and attributes are key-only properties."""
        per_parent: dict[str, int] = {}
        for device in self.device_vertices():
            if not device.offered:
                continue
            if device.node is not None and device.node in node_uid:
                parent, rank = node_uid[device.node], self._nodes[device.node].rank
            elif device.node is not None:
                continue  # its node is not in the graph (cordoned away, or gone)
            else:
                reached = [n for n in device.reaches if n in self._nodes]
                domain = self.common_domain(reached) if reached else ()
                parent, rank = domain_uid.get(domain, 0), -1
            under = self.device_parent(device)
            ordinal = per_parent[under] = per_parent.get(under, -1) + 1
            properties = {names.device_property("driver", device.driver),
                          names.device_property("pool", device.pool)}
            properties.update(names.device_property(k, v) for k, v in device.attributes)
            uid = writer.vertex(DEVICE_TYPE, DEVICE_TYPE, ordinal, rank,
                                f"{under}/{device.vertex_name}", name=device.vertex_name,
                                properties=properties)
            writer.edge(parent, uid)


def _zones(info: NodeInfo, memory_chunks: int, chunks_per_core: int) -> tuple[ZoneSpan, ...]:
    """The node's NUMA zones as id ranges (:func:`fluence_core.numa.spans`): cores and GPUs
    as the zones report them; memory chunks in proportion to the zones' memory
    (:func:`fluence_core.numa.shares`), or following the cores where a zone reports none."""
    if info.numa is None or not info.numa.zones:
        return ()
    zones = info.numa.zones
    cores = spans(tuple(z.cores for z in zones), info.cores)
    gpus = spans(tuple(z.gpus for z in zones), info.gpus)
    reported = tuple(z.memory_mib for z in zones)
    memory = (shares(tuple(m or 0 for m in reported), memory_chunks)
              if all(m is not None for m in reported) else
              spans(tuple((stop - start) * chunks_per_core for start, stop in cores),
                    memory_chunks))
    return tuple(ZoneSpan(z.name, c, g, m) for z, c, g, m in zip(zones, cores, gpus, memory))


_text = json.encoder.encode_basestring_ascii  # what json.dumps writes for a string
_CONTAINS = '"metadata":{"name":{"containment":"contains"}}}'


class _JgfWriter:
    """Accumulates JGF vertices (sequential ``uniq_id``) and edges as JSON text pieces."""

    def __init__(self) -> None:
        self.vertices: list[str] = []
        self.edges: list[str] = []

    def vertex(
        self,
        vtype: str,
        basename: str,
        vid: int,
        rank: int,
        path: str,
        *,
        name: str | None = None,
        size: int = 1,
        unit: str = "",
        properties: Iterable[str] = (),
    ) -> int:
        uniq = len(self.vertices)
        props = sorted(properties)
        extra = ""
        if props:
            extra = ',"properties":{' + ",".join(f'{_text(p)}:""' for p in props) + "}"
        self.vertices.append(
            f'{{"id":"{uniq}","metadata":{{"type":{_text(vtype)},"basename":{_text(basename)},'
            f'"name":{_text(name if name is not None else f"{basename}{vid}")},"id":{vid},'
            f'"uniq_id":{uniq},"rank":{rank},"exclusive":false,"unit":{_text(unit)},'
            f'"size":{size},"paths":{{"containment":{_text(path)}}}{extra}}}}}'
        )
        return uniq

    def children(self, parent: int, kind: str, ids: tuple[int, int], rank: int, path: str, *,
                 size: int = 1, unit: str = "") -> None:
        """Plain vertices ``<kind><id>`` for ids ``[start, stop)`` under ``parent`` (cores,
        GPUs, memory chunks; a NUMA zone holds a range of its node's ids)."""
        head = f'"metadata":{{"type":"{kind}","basename":"{kind}","name":"{kind}'
        tail = f',"exclusive":false,"unit":{_text(unit)},"size":{size},"paths":{{"containment":'
        where = _text(f"{path}/{kind}")[:-1]
        first = len(self.vertices)
        start, stop = ids
        count = max(0, stop - start)
        self.vertices.extend(
            f'{{"id":"{u}",{head}{i}","id":{i},"uniq_id":{u},"rank":{rank}{tail}{where}{i}"}}}}}}'
            for i, u in zip(range(start, stop), range(first, first + count))
        )
        self.edges.extend(f'{{"source":"{parent}","target":"{u}",{_CONTAINS}'
                          for u in range(first, first + count))

    def edge(self, source: int, target: int) -> None:
        self.edges.append(f'{{"source":"{source}","target":"{target}",{_CONTAINS}')

    def text(self) -> str:
        return ('{"graph":{"nodes":[' + ",".join(self.vertices) + '],"edges":['
                + ",".join(self.edges) + "]}}")
