"""Prometheus metrics of one scheduler (its own registry, so tests can make many)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class SchedulerMetrics:
    """Attempts by result, group latency, pending groups, graph utilisation."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.attempts = Counter(
            "fluence_scheduling_attempts", "Group scheduling attempts by result.", ["result"],
            registry=self.registry,
        )
        self.group_latency = Histogram(
            "fluence_group_e2e_seconds", "Seconds from a group being seen pending to bound.",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, float("inf")),
            registry=self.registry,
        )
        self.pending_groups = Gauge(
            "fluence_pending_groups", "Groups waiting to be placed.", registry=self.registry
        )
        self.utilisation = Gauge(
            "fluence_graph_utilisation", "Fraction of the graph's resources held.", ["resource"],
            registry=self.registry,
        )
