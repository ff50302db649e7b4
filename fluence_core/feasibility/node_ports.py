"""NodePorts: a host port (IP, protocol, port) is used by at most one pod per node.

``0.0.0.0`` (also an absent host IP) binds every address, so it conflicts with
the same protocol and port on any IP; two specific IPs conflict only when equal.
Ports of init containers count as well as the app containers'.
"""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.feasibility.base import FINE, FeasibilityFilter, NodeCheck
from fluence_core.feasibility.facts import WILDCARD_IP, HostPort, NodeFacts, PodFacts, Snapshot
from fluence_core.settings import Settings

REASON = "node(s) didn't have free ports for the requested pod ports"


def conflicts(wanted: HostPort, used: set[HostPort]) -> bool:
    if wanted.ip == WILDCARD_IP:
        return any((u.protocol, u.port) == (wanted.protocol, wanted.port) for u in used)
    return (HostPort(WILDCARD_IP, wanted.protocol, wanted.port) in used
            or wanted in used)


class NodePorts:
    name = "NodePorts"
    reads_pods = True

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> NodeCheck | None:
        if not pod.host_ports:
            return None
        wanted = pod.host_ports

        def check(node: NodeFacts) -> tuple[str, ...]:
            used = {p for other in snapshot.pods_on(node.name) for p in other.host_ports}
            if any(conflicts(port, used) for port in wanted):
                return (REASON,)
            return FINE

        return check


@hookimpl
def fluence_feasibility_filters(settings: Settings) -> list[FeasibilityFilter]:
    """The scheduler's built-in NodePorts filter (block it with FLUENCE_DISABLE_PLUGINS)."""
    return [NodePorts()]
