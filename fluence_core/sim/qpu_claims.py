"""The QPU driver's part in a simulated run whose quantum jobs ask for their backend by claim.

On a cluster the driver (plugin ``fluence-dra-qpu``) publishes the resources file's
backends as network-attached devices and its kubelet plugin hands a container that
uses a claim ``FLUXION_BACKEND`` and ``FLUXION_<ATTR>`` through CDI. In the simulation
:func:`qpu_objects` writes the same DeviceClasses and one slice (pool ``cluster``,
``allNodes``) with the vertices a claim of the simulation can ask for (each backend's
``qdevice`` and its slots; not its qubits), named and attributed as the driver names
them (``type``, ``backend``, ``vertex`` and the file's attributes), so the scheduler
matches them to its graph exactly as it matches the driver's; :func:`claim_env` is the
kubelet plugin's environment; :func:`job_claim` the claim a job's pods name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fluence_core import names
from fluence_core.hybrid.claims import claimed_backend, published_key
from fluence_core.kube.api import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, ClusterAPI
from fluence_core.kube.api import KubeObject
from fluence_core.resource_config import ResourceConfig, VirtualResource

POOL = "cluster"
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def device_classes() -> list[KubeObject]:
    """The DeviceClasses deploy/qpu-driver.yaml ships."""
    driver = f'device.driver == "{names.QPU_DRA_DRIVER}"'
    qpu = f'{driver} && device.attributes["{names.QPU_DRA_DRIVER}"].type == "qpu"'
    return [{"apiVersion": DEVICE_CLASSES.api_version, "kind": DEVICE_CLASSES.kind,
             "metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": cel}}]}}
            for name, cel in ((names.QPU_DEVICE_CLASS, qpu), (names.QPU_BACKENDS_CLASS, driver))]


def _vertices(resource: VirtualResource, base: str, backend: str,
              ) -> Iterator[tuple[str, str, str, dict[str, str]]]:
    for instance in range(resource.count):
        path = f"{base}/{resource.name}{instance}"
        if resource.type != "qubit":
            yield resource.type, path, backend, dict(resource.attributes)
            for child in resource.children:
                yield from _vertices(child, path, backend)


def qpu_slice(config: ResourceConfig) -> KubeObject:
    """One slice of every cluster-level backend vertex a simulated claim may ask for."""
    devices: list[dict[str, Any]] = []
    for resource in config.resources:
        for kind, path, backend, attributes in _vertices(resource, "", resource.name):
            published: dict[str, Any] = {"type": {"string": kind},
                                         "backend": {"string": backend},
                                         "vertex": {"string": path}}
            for key, value in sorted(attributes.items()):
                published[f"{names.RESOURCE_DOMAIN}/{published_key(key)}"] = {"string": value}
            name = _UNSAFE.sub("-", path.strip("/").lower()).strip("-")
            devices.append({"name": f"{name[:50]}-{len(devices)}", "attributes": published})
    return {"apiVersion": RESOURCE_SLICES.api_version, "kind": RESOURCE_SLICES.kind,
            "metadata": {"name": "sim-qpu-cluster",
                         "labels": {names.MANAGED_BY_LABEL: names.QPU_DRIVER_MANAGER}},
            "spec": {"driver": names.QPU_DRA_DRIVER, "allNodes": True, "devices": devices,
                     "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1}}}


def qpu_objects(cluster: ClusterAPI, config: ResourceConfig) -> None:
    """Install the DeviceClasses and publish the backends, as the driver would."""
    for device_class in device_classes():
        cluster.create(DEVICE_CLASSES, device_class)
    cluster.create(RESOURCE_SLICES, qpu_slice(config))


def job_claim(name: str, vtype: str, backend: str | None) -> KubeObject:
    """The ResourceClaim a job's pods name: one ``vtype`` device, of ``backend`` if pinned."""
    exactly: dict[str, Any] = {"deviceClassName": names.QPU_BACKENDS_CLASS,
                               "allocationMode": "ExactCount", "count": 1}
    selectors = [f'device.attributes["{names.QPU_DRA_DRIVER}"].type == "{vtype}"']
    if backend is not None:
        selectors.append(f'device.attributes["{names.QPU_DRA_DRIVER}"].backend == "{backend}"')
    exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"apiVersion": RESOURCE_CLAIMS.api_version, "kind": RESOURCE_CLAIMS.kind,
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "qpu", "exactly": exactly}]}}}


def claim_env(cluster: ClusterAPI, pod: KubeObject) -> dict[str, str]:
    """What the kubelet plugin's CDI device sets in a container using the pod's QPU claim."""
    found = claimed_backend(cluster, pod)
    env = {}
    for key, value in found.items():
        if key == names.BACKEND_ANNOTATION:
            env[names.ENV_BACKEND] = value
        elif key.startswith(names.ATTR_ANNOTATION_PREFIX):
            env[names.env_name_for_attribute(key[len(names.ATTR_ANNOTATION_PREFIX):])] = value
    return env
