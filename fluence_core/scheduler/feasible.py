"""Kubernetes' filters over the scheduler's view: the nodes each pod of a group may use.

Before a group is matched, each of its pods goes through the feasibility filters
(:mod:`fluence_core.feasibility`, contributed by ``fluence_feasibility_filters``)
against a snapshot of the cluster as the view holds it, plus the placements this
scheduler committed whose binding the watch has not shown yet. A pod's answer
becomes ``PodRequest.allowed``, which the jobspec hands the matcher as a
``hostlist``: the matcher never sees a node Kubernetes would refuse, so nothing
is vetoed after a match. A pod no node passes fails its group with
kube-scheduler's summary ("0/12 nodes are available: ...").

The snapshot is kept from cycle to cycle: each cycle reads again only the pods
the view says changed (a watch event, a binding settled), and everything when a
node changed; answers that depend on the nodes alone are kept as long. It grows
as the cycle commits groups, so a later group sees an earlier one's pods (their
ports, their spread, their anti-affinity).

A lone pod whose filters read the placed pods (affinity, spread, ports) is asked of
the nodes as kube-scheduler asks them: from where the last such search stopped,
until enough nodes are feasible (:func:`~fluence_core.feasibility.run.nodes_to_find`,
``FLUENCE_PERCENTAGE_OF_NODES_TO_SCORE``); its preferences are scored among those.
The graph, not the filters, counts CPU, memory and pod slots: when the matcher finds
no room on the nodes found, the cycle asks for every node before the pod waits
(``every_node``), so the early stop changes where a pod goes, never whether it goes.
A gang's pods are always asked of every node (its match is complete).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from fluence_core import names
from fluence_core.feasibility import Feasibility, FeasibilityFilter, NodeFacts, PodFacts
from fluence_core.feasibility import Snapshot, feasible, nodes_to_find
from fluence_core.feasibility.node_resources_fit import NodeResourcesFit
from fluence_core.feasibility.resources import PODS
from fluence_core.feasibility.run import in_kube_order
from fluence_core.feasibility.scoring import ScorePlugin, preference_tiers
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.kube.api import KubeObject
from fluence_core.models import Group
from fluence_core.matcher.readback import PodPlacement
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.view import ClusterView
from fluence_core.kube.meta import metadata_of


CHANGES_KEPT = 4096
"""Changed pods the view may keep for the snapshot before a cycle reads them unasked."""

Storage = tuple[Sequence[KubeObject], Sequence[KubeObject], Sequence[KubeObject]]
"""(PersistentVolumeClaims, PersistentVolumes, StorageClasses) as listed."""


def filters_of(
    contributions: Iterable[Sequence[FeasibilityFilter] | None],
) -> list[FeasibilityFilter]:
    """Every plugin's filters joined, kube-scheduler's in its order first."""
    return in_kube_order(f for contributed in contributions for f in contributed or ())


class FeasibleNodes:
    """Computes ``PodRequest.allowed`` for the pods of a group, from the view."""

    def __init__(self, view: ClusterView, filters: Sequence[FeasibilityFilter],
                 in_flight: Callable[[], Collection[g.PodKey]],
                 storage: Callable[[], Storage] | None = None,
                 scores: Sequence[ScorePlugin] = (), tiers: int = 0,
                 percentage: int = 0) -> None:
        self.view = view
        self.percentage = percentage
        """kube-scheduler's percentageOfNodesToScore (0: adaptive), for lone pods."""
        self._start = 0
        """Where the next early-stopping search starts (kube-scheduler's
        ``nextStartNodeIndex``): each starts where the last one stopped."""
        self.partial = False
        """Whether the last :meth:`constrain` stopped a search before every node."""
        self.scores = list(scores)
        """kube-scheduler's preference scores, which make each pod's tiers."""
        self.tiers = tiers
        """How many preference tiers a pod gets at most (0: preferences are not read)."""
        self._storage = storage
        """Reads claims, volumes and StorageClasses, once a cycle meets a pod with claims."""
        self._storage_read = False
        self.filters = list(filters)
        self._in_flight = in_flight
        self._pods: dict[g.PodKey, tuple[Any, str, PodFacts | None]] = {}
        self._nodes: dict[str, tuple[Any, NodeFacts | None]] = {}
        self._placed: dict[g.PodKey, str] = {}
        """Pods this scheduler placed whose binding the view does not show yet."""
        self._snapshot: Snapshot | None = None
        """The snapshot of this cycle (None: the next question brings it up to date)."""
        self._kept: Snapshot | None = None
        """The snapshot kept from cycle to cycle, following the pods that changed."""
        self._counted: dict[g.PodKey, PodFacts] = {}
        """The pods ``_kept`` counts, each where it is (or is being) bound."""
        self._node_changes = -1
        """The view's ``node_changes`` when ``_kept`` read the nodes."""
        self._lasting: dict[str, Feasibility] = {}
        """Answers that depend on the nodes alone, by pod signature, until the nodes change
        or a pod with anti-affinity terms is counted."""
        self._read: dict[g.PodKey, PodFacts] = {}
        """The pods of the group being placed, as :meth:`constrain` read them."""

    def begin(self) -> None:
        """A new cycle: the next question reads the view afresh.

        The pods that changed wait for the next question; with none asked for long (no
        pod of Fluence's pending while others come and go) they are read now, once
        :data:`CHANGES_KEPT` have piled up, so what waits stays bounded.
        """
        self._snapshot = None
        if len(self.view.pod_changes) > CHANGES_KEPT:
            self._build()

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = self._build()
            self._storage_read = False
        return self._snapshot

    def _read_storage(self, snapshot: Snapshot) -> str | None:
        """Fill the snapshot's claims, volumes and classes; why not, if they cannot be read."""
        if self._storage_read or self._storage is None:
            return None
        try:
            claims, volumes, classes = self._storage()
        except ApiError as error:
            return (
                f"cannot read PersistentVolumeClaims, PersistentVolumes or StorageClasses: {error}"
            )
        fresh = Snapshot.from_kube([], claims=claims, volumes=volumes, storage_classes=classes)
        snapshot.claims, snapshot.volumes = fresh.claims, fresh.volumes
        snapshot.storage_classes = fresh.storage_classes
        self._storage_read = True
        return None

    def constrain(self, group: Group, pods: Sequence[KubeObject], *,
                  every_node: bool = False) -> Group | str:
        """The group with every pod's allowed nodes, or why one of its pods fits no node.

        A lone pod's search stops at enough feasible nodes unless ``every_node``;
        :attr:`partial` says whether it did.
        """
        snapshot = self.snapshot()
        answers: dict[str, Feasibility] = {}
        tiers: dict[str, tuple[frozenset[str], ...]] = {}
        constrained = []
        self._read = {}
        self.partial = False
        enough = None if every_node or len(group.pods) != 1 else nodes_to_find(
            len(snapshot.nodes), self.percentage)
        for request, pod in zip(group.pods, pods, strict=True):
            try:
                facts = self._read[g.pod_key(pod)] = PodFacts.from_kube(pod)
            except ValueError as error:
                return f"cannot read the pod's scheduling constraints: {error}"
            if facts.claims:
                unreadable = self._read_storage(snapshot)
                if unreadable:
                    return unreadable
            signature = facts.signature()
            answer = answers.get(signature) or self._lasting.get(signature)
            if answer is None:
                answer = answers[signature] = self._search(facts, snapshot, enough)
                if answer.lasting and not facts.claims:  # claims are read again each cycle
                    self._lasting[signature] = answer
                self.partial = self.partial or answer.partial
            if not answer.nodes:
                return answer.summary()
            preferred = tiers.get(signature)
            if preferred is None:
                preferred = tiers[signature] = self.preferred(facts, answer.feasible_nodes)
            constrained.append(dataclasses.replace(
                request, allowed=answer.node_set, preferred=preferred))
        return dataclasses.replace(group, pods=tuple(constrained))

    def _search(self, facts: PodFacts, snapshot: Snapshot, enough: int | None) -> Feasibility:
        """:func:`feasible`, stopping at ``enough`` feasible nodes from where the last search
        that stopped early left off (``None``: every node)."""
        if enough is None:
            return feasible(facts, snapshot, self.filters)
        answer = feasible(facts, snapshot, self.filters, enough=enough, start=self._start)
        if snapshot.nodes:
            self._start = (self._start + answer.searched) % len(snapshot.nodes)
        return answer

    def preferred(self, facts: PodFacts,
                  nodes: Sequence[NodeFacts]) -> tuple[frozenset[str], ...]:
        """The pod's preference tiers among its feasible ``nodes`` (best first)."""
        if not self.tiers or not self.scores or len(nodes) < 2:
            return ()
        return preference_tiers(facts, self.snapshot(), nodes, self.scores, self.tiers)

    def explain(self, pods: Sequence[KubeObject]) -> str | None:
        """kube-scheduler's summary for the first pod no node has room for, counting what the
        graph counts too (CPU, memory, GPUs): why a group the matcher could not place waits.
        ``None`` when each pod alone would fit somewhere (the group as a whole does not)."""
        seen: set[str] = set()
        for pod in pods:
            try:
                facts = PodFacts.from_kube(pod)
            except ValueError:
                continue
            signature = facts.signature()
            if signature in seen:
                continue
            seen.add(signature)
            summary = self.explain_facts(facts)
            if summary is not None:
                return summary
        return None

    def explain_facts(self, facts: PodFacts) -> str | None:
        """kube-scheduler's summary when no node has room for this pod, counting what the
        graph counts too; ``None`` when some node would take it."""
        answer = feasible(facts, self.snapshot(), [_counting_all(f) for f in self.filters])
        return None if answer.nodes else answer.summary()

    def facts_of(self, group: Group) -> list[PodFacts] | None:
        """The group's pods as :meth:`constrain` read them (``None`` when it has not)."""
        found = [self._read.get((pod.namespace, pod.name)) for pod in group.pods]
        return None if None in found else [f for f in found if f is not None]

    def placed(self, pods: Sequence[KubeObject], placements: Mapping[str, PodPlacement]) -> None:
        """A group was committed: its pods count where they go from now on."""
        for pod in pods:
            key = g.pod_key(pod)
            node = placements[f"{key[0]}/{key[1]}"].node
            if node is None:
                continue
            self._placed[key] = node
            facts = self._read.get(key)
            if self._snapshot is None or facts is None:
                self.view.touch(key)  # counted when the next snapshot is brought up to date
                continue
            self._count(key, facts.on(node))

    # -- the snapshot ----------------------------------------------------------------

    def _build(self) -> Snapshot:
        """The kept snapshot brought up to date: only the pods the view says changed are
        read again (every cycle read every pod before: O(pods) a cycle, with a cycle per
        watch event under a backlog); all of it when the nodes changed."""
        view = self.view
        in_flight = self._in_flight()
        if self._kept is None or view.node_changes != self._node_changes:
            self._node_changes = view.node_changes
            nodes = [node_facts for name, obj in view.nodes.items()
                     if (node_facts := self._node_facts(name, obj)) is not None]
            self._kept, self._counted, self._lasting = Snapshot(nodes=nodes), {}, {}
            view.pod_changes.update(view.pods)
        changed, view.pod_changes = view.pod_changes, set()
        for key in changed:
            self._recount(key, view.pods.get(key), in_flight)
        return self._kept

    def _recount(self, key: g.PodKey, obj: KubeObject | None,
                 in_flight: Collection[g.PodKey]) -> None:
        """Count a changed pod where it is now: bound, or being bound by this scheduler."""
        node = ""
        if obj is not None and not g.is_finished(obj):
            node = (obj.get("spec") or {}).get("nodeName") or ""
            if not node and key in in_flight:
                node = self._placed.get(key, "")
        if key not in in_flight or obj is None or g.is_bound(obj):
            self._placed.pop(key, None)
        if obj is None:
            self._pods.pop(key, None)
        facts = self._pod_facts(key, obj, node) if obj is not None and node else None
        if facts is None:
            old = self._counted.pop(key, None)
            if old is not None and self._kept is not None:
                self._kept.remove(old)
            return
        self._count(key, facts)

    def _count(self, key: g.PodKey, facts: PodFacts) -> None:
        """Count ``facts`` for ``key`` in the kept snapshot, in place of what was counted."""
        old = self._counted.get(key)
        if old is facts or self._kept is None:
            return
        if old is not None:
            self._kept.remove(old)
        self._counted[key] = facts
        self._kept.add(facts)
        if facts.anti_affinity:
            self._lasting = {}  # every pod must now be asked about its terms

    def _pod_facts(self, key: g.PodKey, obj: KubeObject, node: str) -> PodFacts | None:
        version = _version(obj)
        cached = self._pods.get(key)
        if cached is not None and cached[0] == version and cached[1] == node:
            return cached[2]
        try:
            facts: PodFacts | None = PodFacts.from_kube(obj)
        except (ValueError, TypeError, AttributeError, KeyError) as error:  # a garbled object
            logger.warning("pod %s/%s on %s is left out of the filters: %s", *key, node, error)
            facts = None
        if facts is not None and facts.node_name != node:
            facts = facts.on(node)
        self._pods[key] = (version, node, facts)
        return facts

    def _node_facts(self, name: str, obj: KubeObject) -> NodeFacts | None:
        version = _version(obj)
        cached = self._nodes.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            facts: NodeFacts | None = NodeFacts.from_kube(obj)
        except (ValueError, TypeError, AttributeError, KeyError) as error:  # a garbled object
            logger.warning("node %s is left out of the filters: %s", name, error)
            facts = None
        self._nodes[name] = (version, facts)
        return facts


def _counting_all(feasibility_filter: FeasibilityFilter) -> FeasibilityFilter:
    """NodeResourcesFit counting CPU, memory and GPUs too; pod slots and virtual types are
    left to the matcher, which reports them in its own words."""
    if isinstance(feasibility_filter, NodeResourcesFit):
        return NodeResourcesFit(ignored={PODS}, ignored_prefixes=(f"{names.RESOURCE_DOMAIN}/",))
    return feasibility_filter


def _version(obj: KubeObject) -> Any:
    """What tells a changed object from the one read before: its resourceVersion, or (an
    object that has none, as in some tests) the dict itself, read again each time."""
    return metadata_of(obj).get("resourceVersion") or object()
