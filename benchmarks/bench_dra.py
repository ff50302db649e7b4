"""Pods with ResourceClaims: Fluence's scheduling rate in memory, with and without claims.

    python benchmarks/bench_dra.py [--nodes 100] [--devices 8] [--pods 400] [--gang 0]

On the in-memory cluster, ``--nodes`` nodes (4 CPUs, 32Gi) each publishing one
ResourceSlice of ``--devices`` devices, and ``--pods`` pending pods of ``100m``,
each with a claim of one device of a class selected by CEL (scheduler_perf's
SchedulingWithResourceClaimTemplate shape, its claims already made). One
scheduling pass places them; the same pods without claims are the control.
``--gang N`` groups the pods into gangs of N. Prints pods per second of each.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fluence_core.kube.api import DEVICE_CLASSES, NODES, PODGROUPS, PODS, RESOURCE_CLAIMS
from fluence_core.kube.api import RESOURCE_SLICES
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request, make_node_dict,
    make_pod_dict, make_pod_group_dict, make_resource_claim_dict, make_resource_slice_dict,
)

DRIVER = "gpu.bench.example.com"


def cluster(nodes: int, devices: int, pods: int, gang: int, claims: bool) -> FakeCluster:
    fake = FakeCluster()
    fake.create(DEVICE_CLASSES, make_device_class_dict("gpu", f'device.driver == "{DRIVER}"'))
    for n in range(nodes):
        name = f"n{n}"
        fake.create(NODES, make_node_dict(name, 4, "32Gi"))
        fake.create(RESOURCE_SLICES, make_resource_slice_dict(
            f"{name}-gpus", DRIVER,
            [make_device(f"gpu{d}", {"model": "a100", "index": d}) for d in range(devices)],
            node=name))
    for g in range(pods // gang if gang else 0):
        fake.create(PODGROUPS, make_pod_group_dict(f"g{g}", gang))
    for p in range(pods):
        spec: dict[str, Any] = {}
        if claims:
            fake.create(RESOURCE_CLAIMS, make_resource_claim_dict(
                f"c{p}", [make_device_request("gpu", "gpu", 1,
                                              f'device.attributes["{DRIVER}"].model == "a100"')]))
            spec["resourceClaims"] = claim_entries(gpu=f"c{p}")
        group = f"g{p // gang}" if gang else None
        fake.create(PODS, make_pod_dict(f"p{p}", "100m", group=group, **spec))
    return fake


def rate(fake: FakeCluster, pods: int) -> float:
    scheduler = Scheduler(fake, load_settings())
    scheduler.start()
    start = time.perf_counter()
    placed = 0
    while placed < pods:
        results = scheduler.schedule_once()
        scheduler.pump()
        done = sum(len(r.placed) for r in results)
        if not done:
            break
        placed += done
    return placed / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--gang", type=int, default=0)
    args = parser.parse_args()
    for claims in (False, True):
        fake = cluster(args.nodes, args.devices, args.pods, args.gang, claims)
        print(f"{'with' if claims else 'without'} claims: "
              f"{rate(fake, args.pods):8.1f} pods/s")


if __name__ == "__main__":
    main()
