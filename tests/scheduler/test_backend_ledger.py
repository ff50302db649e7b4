"""One backend, asked for by extended resource and by claim: never given twice.

The QPU driver publishes the resources file the scheduler's graph is built from; a pod
asks for a backend through ``fluxion.flux-framework.org/qpu`` or through a claim of the
driver's DeviceClass. Whichever comes first holds it; the other waits, in both orders,
across a restart of the scheduler, and gets it once the first lets go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import yaml

from fluence_core import names
from fluence_core.kube.api import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS
from fluence_core.resource_config import parse_resource_config
from fluence_core.scheduler.status import collect_status
from fluence_core.testing import (
    SchedulerHarness, claim_entries, make_device_request, make_resource_claim_dict,
)
from fluence_dra_qpu.driver import QpuDriver
from fluence_dra_qpu.publisher import SlicePublisher
from tests.scheduler.conftest import node, pod

ROOT = Path(__file__).resolve().parents[2]
QPU = names.extended_resource("qpu")
ONE = """\
resources:
  - type: qpu
    name: solo
    attributes: {provider: braket, region: eu-north-1}
"""
TWO = ONE + """\
  - type: qpu
    name: other
    attributes: {provider: braket, region: eu-north-1}
"""


def _world(tmp_path: Path, resources: str = ONE) -> SchedulerHarness:
    """Two nodes, the graph of ``resources``, the driver's slices of the same file and the
    DeviceClasses as deploy/qpu-driver.yaml ships them."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "resources.yaml"
    path.write_text(resources)
    h = SchedulerHarness(config=parse_resource_config(resources, str(path)))
    for name in ("a", "b"):
        h.add(node(name, 8))
    shipped = yaml.safe_load_all((ROOT / "deploy" / "qpu-driver.yaml").read_text())
    for document in shipped:
        if document and document.get("kind") == "DeviceClass":
            h.cluster.create(DEVICE_CLASSES, document)
    QpuDriver(SlicePublisher(h.cluster), path, 1.0).step()
    return h


def _by_resource(h: SchedulerHarness, name: str) -> None:
    h.add(pod(name, requests={QPU: "1"}))


def _by_claim(h: SchedulerHarness, name: str) -> None:
    h.cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        name, [make_device_request("qpu", names.QPU_DEVICE_CLASS)]), "default")
    h.add(pod(name, resourceClaims=claim_entries(qpu=name)))


def _claimed(h: SchedulerHarness, claim: str) -> list[str]:
    found = h.cluster.get(RESOURCE_CLAIMS, claim, "default") or {}
    allocation = (found.get("status") or {}).get("allocation") or {}
    return [r["device"] for r in (allocation.get("devices") or {}).get("results") or []]


def _backend(h: SchedulerHarness, name: str) -> str | None:
    found = h.cluster.get(PODS, name, "default") or {}
    value = ((found.get("metadata") or {}).get("annotations") or {}).get(
        names.BACKEND_ANNOTATION)
    return str(value) if value is not None else None


def _gone(h: SchedulerHarness, name: str, claim: bool = False) -> None:
    """The pod finished and is deleted; a claim is released as the resourceclaim
    controller releases it (reserved for no one: allocation cleared)."""
    h.finish(name)
    h.cluster.delete(PODS, name, "default")
    if claim:
        h.cluster.patch_status(RESOURCE_CLAIMS, name, {"status": {
            "allocation": None, "reservedFor": None}}, "default")


Order = Callable[[SchedulerHarness, str], None]


def test_a_backend_held_for_the_extended_resource_is_not_free_for_a_claim(
        tmp_path: Path) -> None:
    h = _world(tmp_path)
    _by_resource(h, "first")
    h.cycle()
    assert h.node_of("first") is not None and _backend(h, "first") == "solo"
    _by_claim(h, "second")
    h.cycle()
    assert h.node_of("second") is None and _claimed(h, "second") == []
    _gone(h, "first")
    h.cycle()
    h.cycle()
    assert h.node_of("second") is not None and _claimed(h, "second") == ["solo0"]


def test_a_backend_held_by_a_claim_is_not_given_for_the_extended_resource(
        tmp_path: Path) -> None:
    h = _world(tmp_path)
    _by_claim(h, "first")
    h.cycle()
    assert h.node_of("first") is not None and _claimed(h, "first") == ["solo0"]
    _by_resource(h, "second")
    h.cycle()
    assert h.node_of("second") is None and _backend(h, "second") is None
    _gone(h, "first", claim=True)
    h.cycle()
    h.cycle()
    assert h.node_of("second") is not None and _backend(h, "second") == "solo"


def test_after_a_restart_the_claims_status_and_the_records_keep_both_sides(
        tmp_path: Path) -> None:
    h = _world(tmp_path)
    _by_claim(h, "claimed")
    h.cycle()
    assert _claimed(h, "claimed") == ["solo0"]
    h.restart()
    _by_resource(h, "asked")
    h.cycle()
    assert h.node_of("asked") is None, "the restarted scheduler gave a claimed backend"

    h2 = _world(tmp_path / "other")
    _by_resource(h2, "asked")
    h2.cycle()
    assert _backend(h2, "asked") == "solo"
    h2.restart()
    _by_claim(h2, "claimed")
    h2.cycle()
    assert h2.node_of("claimed") is None and _claimed(h2, "claimed") == []


def test_with_two_backends_each_path_gets_its_own(tmp_path: Path) -> None:
    h = _world(tmp_path, TWO)
    _by_claim(h, "claimed")
    h.cycle()
    [device] = _claimed(h, "claimed")
    _by_resource(h, "asked")
    h.cycle()
    backend = _backend(h, "asked")
    assert backend is not None and f"{backend}0" != device
    _by_resource(h, "third")
    _by_claim(h, "fourth")
    h.cycle()
    assert (h.node_of("third"), h.node_of("fourth")) == (None, None)
    shown = {path: holder for path, _type, holder in collect_status(h.scheduler).virtual}
    assert shown[f"/cluster0/{device}"] == "default/claimed (ResourceClaim)"
    assert shown[f"/cluster0/{backend}0"] == "default/asked"


NESTED = """\
resources:
  - type: qdevice
    name: nested
    attributes: {provider: braket}
    with:
      - type: qpu
        count: 2
"""


def test_a_claimed_part_of_a_backend_holds_the_backend_for_the_extended_resource(
        tmp_path: Path) -> None:
    """A claim takes one ``qpu`` under a ``qdevice``; the extended resource allocates the
    ``qdevice`` whole, so it waits, and is given once both claims on its parts are gone."""
    h = _world(tmp_path, NESTED)
    _by_claim(h, "first")
    _by_claim(h, "second")
    h.cycle()
    devices = [d for c in ("first", "second") for d in _claimed(h, c)]
    assert len(devices) == len(set(devices)) == 2  # its two qpus, one claim each
    assert len(set(h.scheduler.view.backends.holds.values())) == 1  # one instance, one job
    _by_resource(h, "asked")
    h.cycle()
    assert h.node_of("asked") is None
    _gone(h, "first", claim=True)
    h.cycle()
    assert h.node_of("asked") is None, "the other claimed qpu still holds the qdevice"
    _gone(h, "second", claim=True)
    h.cycle()
    h.cycle()
    assert _backend(h, "asked") == "nested"
