"""VolumeBinding: claims, bound volumes' node affinity, WaitForFirstConsumer."""

from __future__ import annotations

from typing import Any

from fluence_core.feasibility.volume_binding import (
    BIND_CONFLICT, MISSING_VOLUME, NODE_CONFLICT, UNBOUND_IMMEDIATE, VolumeBinding,
)
from tests.feasibility.kube_objects import node, pod, refusals, snapshot

NODES = [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})]


def _claim(name: str, *, volume: str = "", storage_class: str = "local", size: str = "1Gi",
           **metadata: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": size}}}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "default", **metadata}, "spec": spec}


def _volume(name: str, zone: str | None, *, storage_class: str = "local", size: str = "1Gi",
            claim: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                            "capacity": {"storage": size}}
    if zone:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": [zone]}]}]}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {"metadata": {"name": name}, "spec": spec}


def _class(name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner",
           **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        **extra,
    }


def _user(*claims: str) -> dict[str, Any]:
    return pod(
        "p", volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    )


def _run(new: dict[str, Any], **storage: Any) -> dict[str, tuple[str, ...]]:
    return refusals(VolumeBinding(), new, snapshot(NODES, [], **storage))


def _fine(result: dict[str, tuple[str, ...]]) -> set[str]:
    return {n for n, reasons in result.items() if not reasons}


def test_a_pod_without_claims_fits_everywhere() -> None:
    assert _fine(_run(pod("p", volumes=[{"name": "tmp", "emptyDir": {}}]))) == {"a1", "b1"}


def test_a_missing_claim_fits_nowhere_and_says_which() -> None:
    result = _run(_user("data"))
    assert result["a1"] == ('persistentvolumeclaim "data" not found',)


def test_a_claim_being_deleted_fits_nowhere() -> None:
    result = _run(_user("data"), claims=[_claim("data", deletionTimestamp="2026-01-01T00:00:00Z")])
    assert result["b1"] == ('persistentvolumeclaim "data" is being deleted',)


def test_a_bound_volume_pins_the_pod_to_its_nodes() -> None:
    result = _run(_user("data"), claims=[_claim("data", volume="pv-a")],
                  volumes=[_volume("pv-a", "a", claim="data")])
    assert _fine(result) == {"a1"} and result["b1"] == (NODE_CONFLICT,)


def test_a_claim_bound_to_a_missing_volume_fits_nowhere() -> None:
    assert set(_run(_user("data"), claims=[_claim("data", volume="gone")]).values()) == {
        (MISSING_VOLUME,)
    }


def test_an_unbound_immediate_claim_waits_for_the_volume_controller() -> None:
    result = _run(_user("data"), claims=[_claim("data")],
                  storage_classes=[_class("local", "Immediate")])
    assert set(result.values()) == {(UNBOUND_IMMEDIATE,)}


def test_wait_for_first_consumer_uses_an_available_volume_on_the_node() -> None:
    result = _run(_user("data"), claims=[_claim("data")],
                  volumes=[_volume("pv-b", "b")],
                  storage_classes=[_class("local", "WaitForFirstConsumer")])
    assert _fine(result) == {"b1"} and result["a1"] == (BIND_CONFLICT,)


def test_wait_for_first_consumer_skips_volumes_too_small_or_taken() -> None:
    volumes = [_volume("small", "a", size="100Mi"), _volume("taken", "a", claim="someone-else"),
               _volume("other-class", "a", storage_class="fast")]
    result = _run(_user("data"), claims=[_claim("data")], volumes=volumes,
                  storage_classes=[_class("local", "WaitForFirstConsumer")])
    assert _fine(result) == set()


def test_two_claims_need_two_volumes() -> None:
    claims = [_claim("one"), _claim("two")]
    storage_classes = [_class("local", "WaitForFirstConsumer")]
    one_volume = _run(_user("one", "two"), claims=claims, volumes=[_volume("pv", "a")],
                      storage_classes=storage_classes)
    assert _fine(one_volume) == set()
    two = _run(_user("one", "two"), claims=claims,
               volumes=[_volume("pv", "a"), _volume("pv2", "a")], storage_classes=storage_classes)
    assert _fine(two) == {"a1"}


def test_a_provisioner_serves_nodes_in_its_allowed_topologies() -> None:
    topology = [{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}]
    result = _run(_user("data"), claims=[_claim("data", storage_class="csi")],
                  storage_classes=[_class("csi", "WaitForFirstConsumer", "csi.example.com",
                                          allowedTopologies=topology)])
    assert _fine(result) == {"b1"}
    anywhere = _run(_user("data"), claims=[_claim("data", storage_class="csi")],
                    storage_classes=[_class("csi", "WaitForFirstConsumer", "csi.example.com")])
    assert _fine(anywhere) == {"a1", "b1"}


def test_ephemeral_volumes_use_the_claim_named_after_pod_and_volume() -> None:
    new = pod("p", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}])
    assert _run(new)["a1"] == ('persistentvolumeclaim "p-scratch" not found',)
