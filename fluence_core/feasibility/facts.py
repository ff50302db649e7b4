"""What the filters read of Pods, Nodes and volumes, parsed once from Kubernetes dicts.

A cycle asks the same questions of the same pods and nodes many times, so each
object is read into a frozen record once (with an error naming the object and
the field when Kubernetes would have refused it) and the filters work on those.
:class:`Snapshot` is the cluster as one scheduling cycle sees it: nodes, the
pods bound to each, namespaces' labels and the storage objects.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from fluence_core import names
from fluence_core.kube.api import KubeObject
from fluence_core.models import volume_claims
from fluence_core.pod_requests import pod_requests
from fluence_core.feasibility.affinity_index import AffinityIndex
from fluence_core.feasibility.resources import PODS, read_amounts
from fluence_core.feasibility.selectors import (
    LabelSelector, NodeSelector, NodeSelectorTerm, SelectorError, parse_term,
)
from fluence_core.kube.meta import labels_of, metadata_of

PREFER_NO_SCHEDULE = "PreferNoSchedule"
WILDCARD_IP = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    """``operator`` is Equal (also when empty), Exists, Lt or Gt; an empty ``effect``
    or ``key`` matches every effect or key."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A required pod (anti-)affinity term with its namespaces resolved against its owner.

    ``namespaces`` is the explicit list, or the owner's namespace when neither a
    list nor a namespace selector is given; ``namespace_selector`` (``None``
    when absent) adds every namespace whose labels it matches.
    """

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A preferred pod (anti-)affinity term and its weight (1-100), for scoring."""

    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class WeightedNodeTerm:
    """A preferred node affinity term and its weight (1-100), for scoring."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pod, as every filter needs it."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    node_name: str = ""
    terminating: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: NodeSelector | None = None
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    claims: tuple[str, ...] = ()
    """Names of the PersistentVolumeClaims its volumes use (ephemeral ones included)."""
    preferred_node_affinity: tuple[WeightedNodeTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()

    @property
    def has_affinity_terms(self) -> bool:
        """Whether another pod's InterPodAffinity score can depend on this pod's terms
        (kube-scheduler's ``PodsWithAffinity``)."""
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def signature(self) -> str:
        """Equal for pods the filters and scores answer alike: every field but the name.
        (The spec would not do: every pod on a real cluster has a volume of its own for its
        service account token, so no two specs are equal.) The fields' tuple, not a copy of
        the pod without its name: the copy and its repr cost ~7 us a pod, this ~2.5."""
        return repr(_BUT_NAME(self))

    def on(self, node: str) -> PodFacts:
        """This pod as bound to ``node``: what the scheduler counts once it places the pod.
        Built from the fields' tuple: ``dataclasses.replace`` walks the fields in Python
        (~5 us a placed pod, this ~3.5)."""
        values = _ALL_FIELDS(self)  # every field, in order (mypy cannot count them)
        return PodFacts(*values[:_NODE_AT], node, *values[_NODE_AT + 1:])  # type: ignore[call-arg]

    @classmethod
    def from_kube(cls, pod: KubeObject) -> PodFacts:
        metadata = metadata_of(pod)
        spec = pod.get("spec") or {}
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata.get("name") or metadata.get("generateName") or "")
        where = f"pod {namespace}/{name}"
        try:
            return cls._read(metadata, spec, pod, namespace, name, where)
        except SelectorError as error:
            raise ValueError(str(error)) from None

    @classmethod
    def _read(cls, metadata: Mapping[str, Any], spec: Mapping[str, Any], pod: KubeObject,
              namespace: str, name: str, where: str) -> PodFacts:
        affinity = spec.get("affinity")
        labels = {str(k): str(v) for k, v in labels_of(pod).items()}
        return cls(
            namespace=namespace,
            name=name,
            labels=labels,
            node_name=str(spec.get("nodeName") or ""),
            terminating=bool(metadata.get("deletionTimestamp")),
            requests=pod_requests(pod, where),
            tolerations=tuple(_toleration(t) for t in spec.get("tolerations") or ()),
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            spread=tuple(
                _spread(c, labels, f"{where}: topologySpreadConstraints[{i}]")
                for i, c in enumerate(spec.get("topologySpreadConstraints") or ())
            ),
            host_ports=_host_ports(spec, where),
            claims=volume_claims(spec, name),
            **(_affinity(affinity, namespace, where) if affinity else {}),
        )


_FIELD_NAMES = [f.name for f in fields(PodFacts)]
_ALL_FIELDS = operator.attrgetter(*_FIELD_NAMES)
_NODE_AT = _FIELD_NAMES.index("node_name")
_BUT_NAME = operator.attrgetter(*(n for n in _FIELD_NAMES if n != "name"))


def _affinity(affinity: KubeObject, namespace: str, where: str) -> dict[str, Any]:
    """The :class:`PodFacts` fields of a pod's ``affinity``, required and preferred. Only a
    pod that has one is read (most have none: six lookups and five messages saved a pod)."""
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    pod_affinity, anti = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
    return {
        "required_node_affinity": (NodeSelector.parse(required, f"{where}: nodeAffinity.required")
                                   if required is not None else None),
        "affinity": _terms(pod_affinity, namespace, f"{where}: podAffinity"),
        "anti_affinity": _terms(anti, namespace, f"{where}: podAntiAffinity"),
        "preferred_node_affinity": _preferred_node_terms(
            node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
            f"{where}: nodeAffinity.preferred"),
        "preferred_affinity": _weighted_terms(pod_affinity, namespace, f"{where}: podAffinity"),
        "preferred_anti_affinity": _weighted_terms(anti, namespace, f"{where}: podAntiAffinity"),
    }


def _toleration(raw: KubeObject) -> Toleration:
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=str(raw.get("operator") or "Equal"),
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


def _terms(raw: KubeObject | None, namespace: str, where: str) -> tuple[AffinityTerm, ...]:
    if not raw:
        return ()
    required = raw.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    return tuple(_term(term, namespace, f"{where}.required[{i}]")
                 for i, term in enumerate(required))


def _term(term: Any, namespace: str, here: str) -> AffinityTerm:
    if not isinstance(term, Mapping):
        raise ValueError(f"{here}: expected a pod affinity term, got {term!r}")
    key = term.get("topologyKey")
    if not key:
        raise ValueError(f"{here}: topologyKey is required")
    listed = frozenset(str(n) for n in term.get("namespaces") or ())
    ns_selector = LabelSelector.parse(
        term.get("namespaceSelector"), f"{here}.namespaceSelector"
    )
    if not listed and ns_selector is None:
        listed = frozenset({namespace})
    return AffinityTerm(
        selector=LabelSelector.parse(term.get("labelSelector"), f"{here}.labelSelector"),
        topology_key=str(key),
        namespaces=listed,
        namespace_selector=ns_selector,
    )


def _weight(raw: Mapping[str, Any], here: str) -> int:
    """A preferred term's weight; the API server keeps it within 1-100."""
    weight = raw.get("weight")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
        raise ValueError(f"{here}.weight: must be an integer in 1-100, got {weight!r}")
    return weight


def _weighted_terms(raw: KubeObject | None, namespace: str,
                    where: str) -> tuple[WeightedTerm, ...]:
    preferred = (raw or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    found = []
    for i, item in enumerate(preferred):
        here = f"{where}.preferred[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{here}: expected a weighted pod affinity term, got {item!r}")
        found.append(WeightedTerm(_weight(item, here), _term(
            item.get("podAffinityTerm"), namespace, f"{here}.podAffinityTerm")))
    return tuple(found)


def _preferred_node_terms(raw: Any, where: str) -> tuple[WeightedNodeTerm, ...]:
    found = []
    for i, item in enumerate(raw or ()):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{here}: expected a preferred scheduling term, got {item!r}")
        found.append(WeightedNodeTerm(_weight(item, here),
                                      parse_term(item.get("preference"), f"{here}.preference")))
    return tuple(found)


def _spread(raw: KubeObject, labels: Mapping[str, str], where: str) -> SpreadConstraint:
    key = raw.get("topologyKey")
    if not key:
        raise ValueError(f"{where}: topologyKey is required")
    try:
        max_skew = int(raw.get("maxSkew", 0))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: maxSkew must be an integer, got {raw.get('maxSkew')!r}")
    if max_skew < 1:
        raise ValueError(f"{where}: maxSkew must be at least 1, got {max_skew}")
    selector = LabelSelector.parse(raw.get("labelSelector"), f"{where}.labelSelector")
    own = {k: labels[k] for k in raw.get("matchLabelKeys") or () if k in labels}
    if own and selector is not None:
        selector = selector.merged(own)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=str(key),
        when_unsatisfiable=str(raw.get("whenUnsatisfiable") or "DoNotSchedule"),
        selector=selector,
        min_domains=int(raw.get("minDomains") or 1),
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
    )


def _host_ports(spec: Mapping[str, Any], where: str) -> tuple[HostPort, ...]:
    ports = []
    containers = list(spec.get("initContainers") or ()) + list(spec.get("containers") or ())
    for container in containers:
        for port in container.get("ports") or ():
            host_port = port.get("hostPort") or 0
            if not isinstance(host_port, int) or host_port < 0:
                raise ValueError(f"{where}: container {container.get('name')}: "
                                 f"hostPort {host_port!r} is not a port number")
            if host_port:
                ports.append(HostPort(str(port.get("hostIP") or WILDCARD_IP),
                                      str(port.get("protocol") or "TCP"), host_port))
    return tuple(ports)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One node, as every filter needs it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @property
    def max_pods(self) -> int:
        return self.allocatable.get(PODS, 0)

    @classmethod
    def from_kube(cls, node: KubeObject) -> NodeFacts:
        metadata = metadata_of(node)
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        name = metadata.get("name")
        if not name:
            raise ValueError("a Node without metadata.name")
        allocatable = status.get("allocatable") or status.get("capacity") or {}
        return cls(
            name=str(name),
            labels={str(k): str(v) for k, v in labels_of(node).items()},
            taints=tuple(
                Taint(
                    str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "")
                )
                for t in spec.get("taints") or ()
            ),
            unschedulable=bool(spec.get("unschedulable", False)),
            allocatable=read_amounts(allocatable, f"node {name}: allocatable"),
        )


@dataclass
class Snapshot:
    """The cluster as one cycle sees it: what the filters compare a pod against.

    ``pods`` are the pods bound (or assumed bound) to a node and not finished;
    ``namespaces`` maps a namespace to its labels; the storage maps are keyed by
    ``namespace/name`` for claims and by name for volumes and classes.
    """

    nodes: list[NodeFacts]
    pods: list[PodFacts] = field(default_factory=list)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    claims: Mapping[str, KubeObject] = field(default_factory=dict)
    volumes: Mapping[str, KubeObject] = field(default_factory=dict)
    storage_classes: Mapping[str, KubeObject] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_node: dict[str, list[PodFacts]] = {n.name: [] for n in self.nodes}
        self._node = {n.name: n for n in self.nodes}
        self.affine: list[PodFacts] = []
        """The bound pods with any pod affinity term (InterPodAffinity's score reads these)."""
        self.affinity_index = AffinityIndex()
        """The counted pods per topology domain, as InterPodAffinity's filter asks (the
        placed pods' required anti-affinity terms among them)."""
        self.soft_tainted = any(t.effect == PREFER_NO_SCHEDULE for n in self.nodes
                                for t in n.taints)
        """Whether a node has a PreferNoSchedule taint (TaintToleration's score reads them)."""
        self._at: dict[int, int] = {}
        """Where each counted pod (by identity) is in ``pods``, so that removing one is cheap."""
        self._spread: dict[SpreadKey, Counter[str]] = {}
        """PodTopologySpread's counts per domain, kept up to date as pods come and go (see
        :meth:`spread_counts`)."""
        pods, self.pods = self.pods, []
        for pod in pods:
            self.add(pod)

    def add(self, pod: PodFacts) -> None:
        """Count a pod bound (or about to be) on ``pod.node_name``; one on no known node is
        left out, as kube-scheduler's cache holds only pods of nodes it has."""
        placed = self._by_node.get(pod.node_name)
        if placed is None or id(pod) in self._at:
            return
        placed.append(pod)
        self._at[id(pod)] = len(self.pods)
        self.pods.append(pod)
        self._spread_count(pod, 1)
        self.affinity_index.add(pod.namespace, pod.labels, pod.anti_affinity, pod.node_name,
                                self._node[pod.node_name].labels)
        if pod.has_affinity_terms:
            self.affine.append(pod)

    def remove(self, pod: PodFacts) -> None:
        """Stop counting a pod :meth:`add` counted (that very object): a snapshot kept from
        one cycle to the next follows the pods that changed instead of being read again.
        The order of ``pods`` is not kept (no filter depends on it)."""
        at = self._at.pop(id(pod), None)
        if at is None:
            return
        self._spread_count(pod, -1)
        self.affinity_index.remove(pod.namespace, pod.labels, pod.anti_affinity, pod.node_name,
                                   self._node[pod.node_name].labels)
        last = self.pods.pop()
        if last is not pod:
            self.pods[at] = last
            self._at[id(last)] = at
        placed = self._by_node[pod.node_name]
        placed[:] = [p for p in placed if p is not pod]
        if pod.has_affinity_terms:
            self.affine = [p for p in self.affine if p is not pod]

    def pods_on(self, node: str) -> list[PodFacts]:
        return self._by_node.get(node, [])

    def spread_counts(self, namespace: str, selector: LabelSelector, key: str,
                      keys: frozenset[str]) -> Counter[str]:
        """For each value of ``key`` on the nodes that carry every one of ``keys``: the pods
        counted here of ``namespace`` that ``selector`` matches, not terminating (zero for a
        domain without any).

        Counted once, then kept up to date by :meth:`add` and :meth:`remove`: the filter
        asked this of every node and every pod on it, for every pod it placed, a cost that
        grew with pods x (nodes + pods). At most :data:`SPREAD_KEPT` such counts are kept
        (each pod that comes or goes updates all of them); the oldest goes first.
        """
        entry = (namespace, selector, key, keys)
        counts = self._spread.get(entry)
        if counts is not None:
            return counts
        counts = Counter()
        for node in self.nodes:
            if keys <= node.labels.keys():
                counts.setdefault(node.labels[key], 0)
        for pod in self.pods:
            _count_spread(entry, counts, pod, self._node.get(pod.node_name), 1)
        if len(self._spread) >= SPREAD_KEPT:
            del self._spread[next(iter(self._spread))]
        self._spread[entry] = counts
        return counts

    def _spread_count(self, pod: PodFacts, delta: int) -> None:
        if self._spread:
            node = self._node.get(pod.node_name)
            for entry, counts in self._spread.items():
                _count_spread(entry, counts, pod, node, delta)

    def node(self, name: str) -> NodeFacts | None:
        return self._node.get(name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels; one not listed carries the label the API server gives all."""
        known = self.namespaces.get(namespace)
        return known if known is not None else {names.NAMESPACE_NAME_LABEL: namespace}

    @classmethod
    def from_kube(
        cls,
        nodes: Iterable[KubeObject],
        pods: Iterable[KubeObject] = (),
        *,
        namespaces: Iterable[KubeObject] = (),
        claims: Iterable[KubeObject] = (),
        volumes: Iterable[KubeObject] = (),
        storage_classes: Iterable[KubeObject] = (),
    ) -> Snapshot:
        """Read every object; pods not bound or already finished are left out."""
        bound = [
            PodFacts.from_kube(p) for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        return cls(
            nodes=[NodeFacts.from_kube(n) for n in nodes],
            pods=bound,
            namespaces={_name(n): dict(labels_of(n))
                        for n in namespaces},
            claims={f"{metadata_of(c).get('namespace') or 'default'}/{_name(c)}": c
                    for c in claims},
            volumes={_name(v): v for v in volumes},
            storage_classes={_name(s): s for s in storage_classes},
        )


SpreadKey = tuple[str, LabelSelector, str, frozenset[str]]
"""(namespace, selector, topology key, every hard constraint's key) of a spread count."""

SPREAD_KEPT = 64


def _count_spread(entry: SpreadKey, counts: Counter[str], pod: PodFacts,
                  node: NodeFacts | None, delta: int) -> None:
    namespace, selector, key, keys = entry
    if (node is None or pod.terminating or pod.namespace != namespace
            or not keys <= node.labels.keys() or not selector.matches(pod.labels)):
        return
    counts[node.labels[key]] += delta


def _name(obj: KubeObject) -> str:
    return str(metadata_of(obj).get("name") or "")
