"""Every Fluence hook, in one module.

Plugins implement these with ``@fluence_core.hookimpl`` and register through the
``fluence`` entry-point group; Fluence's own built-ins register the same way.
Hooks marked *firstresult* stop at the first non-``None`` answer; the others
collect every plugin's answer into a list.

Scheduler hooks run in the order of one scheduling cycle for a group:
``fluence_prefilter`` -> the ``fluence_feasibility_filters`` per pod -> the
``fluence_score_plugins`` per pod -> match (best preference tier first) -> ``fluence_filter``
per pod -> (on failure)
``fluence_postfilter`` -> ``fluence_reserve`` -> ``fluence_prebind`` -> bind,
with ``fluence_unreserve`` undoing a reservation whenever a later step fails.
Each receives a read-only
:class:`~fluence_core.scheduler.context.SchedulingContext` (settings, graph,
matcher, cluster, and what the attempt knows so far), never the scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import pluggy

from fluence_core import names

if TYPE_CHECKING:
    import typer

    from fluence_core.feasibility import FeasibilityFilter
    from fluence_core.feasibility.scoring import ScorePlugin
    from fluence_core.graph import ResourceGraph
    from fluence_core.matcher.base import Matcher
    from fluence_core.models import Group, PodRequest
    from fluence_core.matcher.readback import PodPlacement
    from fluence_core.runtime.provider import Provider
    from fluence_core.scheduler.context import SchedulingContext
    from fluence_core.settings import PluginSettings, Settings
    from fluence_core.kube.api import ClusterAPI
    from fluence_core.webhook.admission.base import AdmissionContext, Handler
    from fluence_core.webhook.transport.routes import Route
    from fluence_core.webhook.transport.server import Loop

hookspec = pluggy.HookspecMarker(names.ENTRY_POINT_GROUP)


@hookspec(firstresult=True)
def fluence_matcher(settings: "Settings", graph: "ResourceGraph") -> "Matcher | None":
    """Return the matcher that places jobspecs on ``graph``.

    Called once when the scheduler (or ``fluence plan``) starts, and again when
    the graph is rebuilt. Stops at the first non-``None`` result: a plugin that
    cannot serve (say, its library is missing) returns ``None`` so the next one
    is asked. The embedded matcher is the ``trylast`` default.

    :param settings: the scheduler's settings (``FLUENCE_MATCH_POLICY`` among them).
    :param graph: the resource graph the matcher will place on, built from the
        nodes and the resources file.
    """


@hookspec
def fluence_feasibility_filters(settings: "Settings") -> "Sequence[FeasibilityFilter] | None":
    """Contribute Kubernetes-style node filters, asked for every pod before matching.

    Called once when the scheduler starts. Every implementation runs and the
    lists are joined; Fluence's own (kube-scheduler's default filters, listed in
    ``fluence_core.feasibility.builtins.BUILTIN_FILTERS``) are each a plugin of
    their own (``filter-*``), so ``FLUENCE_DISABLE_PLUGINS`` can leave any out.
    Filters run in kube-scheduler's order, then any others in plugin order. The nodes a pod
    passes every filter on are the only nodes the matcher may give it.

    :param settings: the scheduler's settings.
    """


@hookspec
def fluence_score_plugins(settings: "Settings") -> "Sequence[ScorePlugin] | None":
    """Contribute Kubernetes-style node scores: the soft preferences of a pod or a node.

    Called once when the scheduler starts. Every implementation runs and the
    lists are joined; Fluence's own (kube-scheduler's NodeAffinity,
    TaintToleration, PodTopologySpread and InterPodAffinity scores, with
    kube-scheduler's weights) are each a plugin of their own (``score-*``), so
    ``FLUENCE_DISABLE_PLUGINS`` can leave any out. Each is asked about a pod's
    feasible nodes; the weighted sums make preference tiers, hostlists the group
    is matched against best first (``FLUENCE_PREFERENCE_TIERS`` of them), the
    whole feasible set last.

    :param settings: the scheduler's settings.
    """


@hookspec(firstresult=True)
def fluence_prefilter(group: "Group", ctx: "SchedulingContext") -> str | None:
    """Veto a group before it is matched.

    Return a reason (a non-empty string) to keep the group waiting this cycle;
    ``None`` lets it through. Stops at the first reason.

    :param group: the pending group: its pods' requests, its size, its priority.
    :param ctx: what this attempt knows (settings, graph, matcher, cluster).
    """


@hookspec(firstresult=True)
def fluence_filter(pod: "PodRequest", node: str, ctx: "SchedulingContext") -> str | None:
    """Veto placing ``pod`` on ``node`` after the match chose it.

    Return a reason to reject the node (the group is then handed to
    ``fluence_postfilter``); ``None`` accepts. Stops at the first reason.

    :param pod: one pod of the group, as the matcher placed it.
    :param node: the name of the node the match chose for ``pod``.
    :param ctx: this attempt, with ``planned``: the match's pods per node.
    """


@hookspec(firstresult=True)
def fluence_postfilter(
    group: "Group", reason: str, ctx: "SchedulingContext"
) -> Sequence[str] | None:
    """Decide what to do when a group did not fit or a node was vetoed.

    Return node names to exclude before one rematch (an empty list means
    "rematch as is"), or ``None`` to let the group back off. Stops at the first
    non-``None`` answer.

    :param group: the group that was not placed.
    :param reason: why: the matcher's answer, or the filter's vetoes.
    :param ctx: this attempt, with ``vetoed``: the nodes the filter refused.
    """


@hookspec
def fluence_reserve(
    group: "Group", placements: Mapping[str, "PodPlacement"], ctx: "SchedulingContext"
) -> None:
    """Stamp a group's placement before binding (every implementation runs).

    Raising aborts the cycle; ``fluence_unreserve`` then runs for everyone.

    :param group: the group about to be bound.
    :param placements: each pod's placement, keyed ``namespace/name``.
    :param ctx: this attempt.
    """


@hookspec
def fluence_unreserve(
    group: "Group", placements: Mapping[str, "PodPlacement"], ctx: "SchedulingContext"
) -> None:
    """Roll back a reservation after a failed step (every implementation runs).

    The scheduler cancels the group's allocation itself after these run, so a
    failed bind never leaks resources.

    :param group: the group whose commit failed.
    :param placements: the placements that were reserved, keyed ``namespace/name``.
    :param ctx: the attempt that reserved them.
    """


@hookspec
def fluence_prebind(
    group: "Group", placements: Mapping[str, "PodPlacement"], ctx: "SchedulingContext"
) -> Mapping[str, str] | None:
    """Contribute annotations to write on the owning object before binding.

    Every implementation runs; the returned mappings are merged in plugin order.

    :param group: the group about to be bound.
    :param placements: each pod's placement, keyed ``namespace/name``.
    :param ctx: this attempt.
    """


@hookspec
def fluence_webhook_handlers(settings: "Settings") -> "Sequence[Handler] | None":
    """Contribute admission handlers (:class:`~fluence_core.webhook.admission.base.Handler`:
    ``name``, ``applies(pod)``, ``mutate(pod, ctx)`` and the optional members the
    protocol declares with their defaults). Called once when the webhook starts;
    every implementation runs; the lists are joined and ordered by the webhook
    settings.

    :param settings: the webhook's settings.
    """


@hookspec
def fluence_webhook_routes(settings: "Settings", cluster: "ClusterAPI") -> "Sequence[Route] | None":
    """Contribute JSON endpoints (:class:`~fluence_core.webhook.transport.routes.Route`: ``path``,
    ``max_body``, ``post(headers, body)``) for pods to call, such as the scouts' reports.
    They are served on the webhook's report port (``FLUENCE_REPORT_PORT``), never on the
    admission port, which only the API server needs to reach. Called once when the webhook
    starts with a cluster connection; every implementation runs but that of a plugin whose
    every handler ``FLUENCE_WEBHOOK_HANDLERS`` leaves out (its routes are its feature's);
    the lists are joined, and two routes with one path are an error.

    :param settings: the webhook's settings.
    :param cluster: the webhook's cluster connection, for the routes to act with.
    """


@hookspec
def fluence_webhook_loops(settings: "Settings", cluster: "ClusterAPI") -> "Sequence[Loop] | None":
    """Contribute periodic tasks of the webhook process (objects with ``start()`` and
    ``stop()``, such as the orphan sweep), run while it serves. Called once when the
    webhook starts with a cluster connection; every implementation runs but that of a
    plugin whose every handler ``FLUENCE_WEBHOOK_HANDLERS`` leaves out; the lists are
    joined.

    :param settings: the webhook's settings.
    :param cluster: the webhook's cluster connection, for the tasks to act with.
    """


@hookspec(firstresult=True)
def fluence_admit(pod: Mapping[str, object], ctx: "AdmissionContext") -> str | None:
    """Refuse a pod at admission: return the message to deny with, or ``None``
    to admit. Called for every pod the webhook sees, before the handlers; ``ctx``
    is the request's :class:`~fluence_core.webhook.admission.base.AdmissionContext` (the
    cluster, the host's clock and the service's state for what must outlive one
    request). Stops at the first refusal.

    :param pod: the pod under review, as the API server sent it (read only).
    :param ctx: the request's admission context.
    """


@hookspec
def fluence_cli(app: "typer.Typer") -> None:
    """Add sub-commands to the ``fluence`` command line. Called once at start,
    every implementation runs.

    :param app: the ``fluence`` Typer application to add commands to.
    """


@hookspec
def fluence_providers() -> "Sequence[Provider] | None":
    """Contribute quantum vendor providers
    (:class:`~fluence_core.runtime.provider.Provider`: interceptor and sidecar
    halves). Every implementation runs; the lists are joined."""


@hookspec
def fluence_settings() -> "Sequence[type[PluginSettings]] | None":
    """Contribute the plugin's settings classes
    (:class:`~fluence_core.settings.PluginSettings` subclasses, each with an env
    prefix of its own) so ``fluence settings`` lists their variables beside the
    core's. Every implementation runs; the lists are joined."""
