"""NodeResourcesFit: millicores, memory, extended resources and pod slots, as kube-scheduler counts.
"""

from __future__ import annotations

import pytest

from fluence_core.feasibility.node_resources_fit import NodeResourcesFit
from tests.feasibility.kube_objects import node, pod, refusals, snapshot


def _fit(
    new: dict[str, object], existing: list[dict[str, object]], **node_args: object
) -> tuple[str, ...]:
    snap = snapshot([node("n", **node_args)], existing)  # type: ignore[arg-type]
    return refusals(NodeResourcesFit(), new, snap)["n"]


@pytest.mark.parametrize(("cpu", "existing", "expected"), [
    ("100m", [], ()),
    ("8", [], ()),
    ("8001m", [], ("Insufficient cpu",)),
    ("100m", ["7900m"], ()),                        # exactly what is left
    ("101m", ["7900m"], ("Insufficient cpu",)),
    ("100m", ["50m"] * 158, ()),                    # DaemonSet-sized pods subtract exactly
    ("1", ["50m"] * 141, ("Insufficient cpu",)),
])
def test_cpu_is_counted_in_millicores(
    cpu: str, existing: list[str], expected: tuple[str, ...]
) -> None:
    pods = [pod(f"o{i}", cpu=c, node_name="n") for i, c in enumerate(existing)]
    assert _fit(pod("p", cpu=cpu), pods, pods="1000") == expected


def test_every_short_resource_is_named() -> None:
    new = pod("p", cpu="9", memory="17Gi", requests={"example.com/fpga": "1"})
    assert _fit(new, [], extra={"example.com/fpga": "0"}) == (
        "Insufficient cpu", "Insufficient memory", "Insufficient example.com/fpga")


@pytest.mark.parametrize(("requests", "extra", "fits"), [
    ({"example.com/fpga": "2"}, {"example.com/fpga": "2"}, True),
    ({"example.com/fpga": "3"}, {"example.com/fpga": "2"}, False),
    ({"example.com/fpga": "1"}, {}, False),                      # not advertised: none
    ({"example.com/fpga": "0"}, {}, True),                       # asking for none always fits
    ({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": "4Mi"}, True),
    ({"hugepages-2Mi": "6Mi"}, {"hugepages-2Mi": "4Mi"}, False),
    ({"ephemeral-storage": "2Gi"}, {"ephemeral-storage": "1Gi"}, False),
])
def test_extended_resources_are_counted(
    requests: dict[str, str], extra: dict[str, str], fits: bool
) -> None:
    reasons = _fit(pod("p", requests=requests), [], extra=extra)
    assert (reasons == ()) is fits


def test_pod_slots_are_counted() -> None:
    existing = [pod(f"o{i}", node_name="n") for i in range(3)]
    assert _fit(pod("p"), existing, pods="3") == ("Too many pods",)
    assert _fit(pod("p"), existing, pods="4") == ()


def test_a_pod_asking_nothing_needs_only_a_slot() -> None:
    assert _fit(pod("p"), [pod("o", cpu="8", node_name="n")]) == ()


def test_overhead_counts() -> None:
    new = pod("p", cpu="7900m", overhead={"cpu": "200m"})
    assert _fit(new, []) == ("Insufficient cpu",)


def test_ignored_resources_are_left_to_someone_else() -> None:
    snap = snapshot([node("n", pods="0")], [])
    result = refusals(NodeResourcesFit(ignored={"cpu", "pods"}), pod("p", cpu="100"), snap)
    assert result == {"n": ()}
