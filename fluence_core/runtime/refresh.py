"""Keep the backend figures ConfigMap fresh: ask every provider, on an interval.

``fluence up`` runs a :class:`FiguresRefresh` beside the scheduling loop (while it
leads) when ``FLUENCE_BACKEND_REFRESH`` is above 0. Each round asks, for every
top-level backend of the resources config, the first provider that serves it
(``fluence_providers`` hook, :meth:`Provider.backend_info`) and writes what they
said to the ConfigMap of :mod:`fluence_core.runtime.figures`, which
``kubectl fluence select`` reads with nothing but read access to it.

A provider that fails keeps its backend's last figures, with their old
``updated`` time, so a reader sees how stale they are; a backend no provider
speaks for, or that left the config, is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fluence_core.kube.api import CONFIGMAPS, ClusterAPI
from fluence_core.kube.errors import ApiError
from fluence_core.log import logger
from fluence_core.periodic import Periodic
from fluence_core.resource_config import ResourceConfig
from fluence_core.runtime import figures
from fluence_core.runtime.provider import BackendInfo, Provider
from fluence_core.runtime.select import backend_of


def _utc_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(info: BackendInfo, source: str, updated: str) -> dict[str, Any]:
    found = {k: getattr(info, k) for k in figures.NUMBERS + figures.COUNTS + ("status",)}
    entry = {k: v for k, v in found.items() if v is not None}
    entry.update(source=source, updated=updated)
    return entry


def collect(config: ResourceConfig, providers: Sequence[Provider],
            previous: Mapping[str, Mapping[str, Any]], updated: str) -> dict[str, dict[str, Any]]:
    """The entries of one round: each backend's provider asked once."""
    entries: dict[str, dict[str, Any]] = {}
    for resource in config.resources:
        backend, _ = backend_of(resource)
        provider = next((p for p in providers if p.matches(backend.attributes)), None)
        if provider is None:
            continue
        try:
            info = provider.backend_info(backend)
        except Exception as error:  # one vendor's outage must not blank the others
            logger.warning("backend figures: %s could not report %s (%s); keeping the last",
                           provider.name, backend.name, error)
            if backend.name in previous:
                entries[backend.name] = dict(previous[backend.name])
            continue
        if info is not None:
            entries[backend.name] = _entry(info, info.source or provider.name, updated)
    return entries


def refresh_once(cluster: ClusterAPI, config: ResourceConfig, providers: Sequence[Provider],
                 ref: figures.ConfigMapRef,
                 now: Callable[[], str] = _utc_text) -> dict[str, dict[str, Any]]:
    """Ask the providers and write the ConfigMap; returns what was written."""
    current = cluster.get(CONFIGMAPS, ref.name, ref.namespace)
    try:
        previous = figures.entries_of(current, ref) if current is not None else {}
    except Exception as error:  # a hand-edited ConfigMap is replaced, not trusted
        logger.warning("backend figures: %s is unreadable (%s); writing it afresh", ref, error)
        previous = {}
    stamp = now()
    entries = collect(config, providers, previous, stamp)
    figures.write_configmap(cluster, ref, entries, stamp, current)
    return entries


class FiguresRefresh(Periodic):
    """:func:`refresh_once` at start and every ``interval`` seconds after, until :meth:`stop`.

    On :class:`~fluence_core.periodic.Periodic`, the loop the webhook's tasks run on, so a
    round that fails is logged and the next one runs as planned. An API error is a
    warning: the ConfigMap is written again next round, and a reader sees the figures'
    age meanwhile. ``config`` is asked each round: a reloaded resources file counts.
    """

    thread_name = "backend-figures"

    def __init__(self, cluster: ClusterAPI, config: Callable[[], ResourceConfig],
                 providers: Sequence[Provider], ref: figures.ConfigMapRef,
                 interval: float) -> None:
        super().__init__(interval, at_start=True)
        self.cluster, self.config, self.providers, self.ref = cluster, config, providers, ref
        self.failure = f"backend figures: the round failed (trying again in {interval:g}s)"

    def tick(self) -> dict[str, dict[str, Any]] | None:
        try:
            written = refresh_once(self.cluster, self.config(), self.providers, self.ref)
        except ApiError as error:
            logger.warning("backend figures: cannot write %s (%s); trying again in %gs",
                           self.ref, error, self.interval)
            return None
        logger.info("backend figures: %d backend(s) written to %s", len(written), self.ref)
        return written
