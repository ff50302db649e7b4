"""NodePorts: host ports conflict per IP, protocol and port, with 0.0.0.0 binding every IP."""

from __future__ import annotations

import pytest

from fluence_core.feasibility.node_ports import NodePorts
from tests.feasibility.kube_objects import node, pod, refusals, snapshot

BUSY = ("node(s) didn't have free ports for the requested pod ports",)


@pytest.mark.parametrize(("existing", "wanted", "conflict"), [
    ({"hostPort": 80}, {"hostPort": 80}, True),
    ({"hostPort": 80}, {"hostPort": 81}, False),
    ({"hostPort": 80}, {"hostPort": 80, "protocol": "UDP"}, False),
    ({"hostPort": 80, "protocol": "UDP"}, {"hostPort": 80, "protocol": "UDP"}, True),
    ({"hostPort": 80, "protocol": "SCTP"}, {"hostPort": 80}, False),
    ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80, "hostIP": "10.0.0.2"}, False),
    ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),
    ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80}, True),       # wildcard wants all
    ({"hostPort": 80}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),       # wildcard holds all
    ({"hostPort": 80, "hostIP": "0.0.0.0"}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),
    ({"containerPort": 80}, {"hostPort": 80}, False),                       # no host port used
])
def test_host_port_conflicts(
    existing: dict[str, object], wanted: dict[str, object], conflict: bool
) -> None:
    snap = snapshot([node("n"), node("m")], [pod("old", node_name="n", ports=[existing])])
    result = refusals(NodePorts(), pod("new", ports=[wanted]), snap)
    assert result == {"n": BUSY if conflict else (), "m": ()}


def test_init_container_ports_count() -> None:
    held = pod("old", node_name="n", initContainers=[{"name": "c", "ports": [{"hostPort": 9000}]}])
    snap = snapshot([node("n")], [held])
    assert refusals(NodePorts(), pod("new", ports=[{"hostPort": 9000}]), snap) == {"n": BUSY}
