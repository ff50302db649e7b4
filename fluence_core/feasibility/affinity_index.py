"""The placed pods as InterPodAffinity asks about them, counted per topology domain.

InterPodAffinity's PreFilter compared the pod being placed with every placed pod:
each placed pod's required anti-affinity terms with the pod, and the pod's own
terms with each placed pod. A lone anti-affine pod after a thousand others paid
for a thousand comparisons (O(placed pods) per pod, the cost that kept Fluence
below kube-scheduler at 5,000 nodes). kube-scheduler builds per-cycle maps of
counts per topology pair; this index keeps the same counts up to date as the
snapshot's pods come and go, so that a pod's question costs O(distinct terms +
distinct sets of pods alike), whatever the number of placed pods:

* **existing anti-affinity**: for each distinct required anti-affinity term of the
  placed pods (a term is a value: selector, key, resolved namespaces), how many
  pods carrying it sit in each value of its topology key. Whether a term names
  the pod being placed depends on the term and the pod alone, so it is asked once
  per term, not once per placed pod.
* **pods alike**: the placed pods grouped by namespace and labels, which is all a
  term reads of a pod; for each group and each topology key a term asked about, how
  many of its pods sit in each value of that key (made when first asked, then kept).

Counts that fall to zero are deleted: a domain is in a count exactly when a pod
is there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # facts.py holds the index in its Snapshot
    from fluence_core.feasibility.facts import AffinityTerm

NamespaceAndLabels = tuple[str, tuple[tuple[str, str], ...]]
"""A placed pod's namespace and labels: what a term reads of it."""


@dataclass
class PodsAlike:
    """The placed pods of one namespace and one set of labels: where they are, by node and
    by topology domain."""

    namespace: str
    labels: Mapping[str, str]
    nodes: Counter[str] = field(default_factory=Counter)
    """Pods of this group per node name."""
    domains: dict[str, Counter[str]] = field(default_factory=dict)
    """Per topology key asked about: pods of this group per value of the key (on nodes that
    carry it)."""


def namespace_and_labels(namespace: str, labels: Mapping[str, str]) -> NamespaceAndLabels:
    return namespace, tuple(labels.items())


class AffinityIndex:
    """Counts of the placed pods per topology domain, for InterPodAffinity's PreFilter."""

    def __init__(self) -> None:
        self.anti_terms: dict[AffinityTerm, Counter[str]] = {}
        """Each placed pod's required anti-affinity term -> pods carrying it per value of its
        topology key (only nodes carrying the key count)."""
        self._alike: dict[NamespaceAndLabels, PodsAlike] = {}
        self._node_labels: dict[str, Mapping[str, str]] = {}

    def add(self, namespace: str, labels: Mapping[str, str],
            anti_affinity: tuple[AffinityTerm, ...], node: str,
            node_labels: Mapping[str, str]) -> None:
        """Count a pod placed on ``node`` (whose labels are ``node_labels``)."""
        self._change(namespace, labels, anti_affinity, node, node_labels, 1)

    def remove(self, namespace: str, labels: Mapping[str, str],
               anti_affinity: tuple[AffinityTerm, ...], node: str,
               node_labels: Mapping[str, str]) -> None:
        """Stop counting a pod :meth:`add` counted."""
        self._change(namespace, labels, anti_affinity, node, node_labels, -1)

    def pods_alike(self) -> Iterator[PodsAlike]:
        """The placed pods, grouped by namespace and labels (each group has a pod)."""
        return iter(self._alike.values())

    def domains(self, alike: PodsAlike, key: str) -> Counter[str]:
        """Pods of ``alike`` per value of ``key``: made from its nodes when first
        asked, kept up to date after."""
        counts = alike.domains.get(key)
        if counts is None:
            counts = alike.domains[key] = Counter()
            for node, count in alike.nodes.items():
                value = self._node_labels[node].get(key)
                if value is not None:
                    counts[value] += count
        return counts

    def _change(self, namespace: str, labels: Mapping[str, str],
                anti_affinity: tuple[AffinityTerm, ...], node: str,
                node_labels: Mapping[str, str], delta: int) -> None:
        self._node_labels[node] = node_labels
        for term in anti_affinity:
            value = node_labels.get(term.topology_key)
            if value is None:
                continue
            counts = self.anti_terms.get(term)
            if counts is None:
                counts = self.anti_terms[term] = Counter()
            _bump(counts, value, delta)
            if not counts:
                del self.anti_terms[term]
        key = namespace_and_labels(namespace, labels)
        alike = self._alike.get(key)
        if alike is None:
            alike = self._alike[key] = PodsAlike(namespace, labels)
        _bump(alike.nodes, node, delta)
        if not alike.nodes:
            del self._alike[key]
            return
        for topology_key, counts in alike.domains.items():
            value = node_labels.get(topology_key)
            if value is not None:
                _bump(counts, value, delta)


def _bump(counts: Counter[str], key: str, delta: int) -> None:
    """Add ``delta`` to ``counts[key]``, deleting the entry at zero."""
    now = counts[key] + delta
    if now > 0:
        counts[key] = now
    else:
        del counts[key]
