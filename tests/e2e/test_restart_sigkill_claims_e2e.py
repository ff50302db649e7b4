"""``fluence up`` SIGKILLed while gangs whose pods hold ResourceClaims bind, on a real API
server with kube-controller-manager (its resourceclaim controller makes the template
claims and releases them when the pods finish).

4 nodes of 4 cores, each with 2 devices of this test's driver; gangs of 2 to 4 pods,
each pod one core and one device, so the devices, not the cores, decide how many
gangs fit at once (8 pods). Twice, as soon as a gang shows bound in part, the
scheduler is SIGKILLed and started again at once. A finished gang's pods are marked
Succeeded, the controller releases their claims, and the next gangs take the devices.

What must hold, watched all along on the claims themselves (the API's source of
truth, which is what a restarted scheduler reads):
* no device is ever in the allocation of two claims at once;
* every gang ends bound whole, each member on the node its claim's devices are on,
  with its claim reserved for it;
* a claim written before a kill is never allocated again by the restarted scheduler
  (its allocation never changes while it is allocated).
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from typing import Any

import pytest

from fluence_core.kube.api import RESOURCE_CLAIMS
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.testing_apiserver import ApiServer
from tests.e2e.test_dra_e2e import Dra
from tests.e2e.test_restart_sigkill_e2e import (
    Process, env, spawn, stop_gracefully, watch_binds,
)

pytestmark = pytest.mark.e2e
__all__ = ["env"]  # the fixture, shared with the first SIGKILL test

SIZES = [2, 3, 4] * 3
NODES = 4
DEVICES_PER_NODE = 2
KILLS = 2
ATTEMPTS = 12
"""SIGKILLs at most: one lands in a gang bound in part only if the gang has not finished
binding by the time the signal does."""
FINISH_AFTER = 0.5


class ClaimLedger:
    """Every allocation the claims' watch showed, checked as it arrives."""

    def __init__(self) -> None:
        self.holder: dict[str, str] = {}
        """Device (pool/device) -> the claim whose allocation holds it now."""
        self.allocation: dict[str, tuple[str, ...]] = {}
        """Claim -> its devices, while allocated."""
        self.reserved: dict[str, list[str]] = {}
        self.violations: list[str] = []
        self.allocations_seen = 0

    def see(self, claim: dict[str, Any]) -> None:
        name = claim["metadata"]["name"]
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        devices = tuple(sorted(f"{r['pool']}/{r['device']}" for r in results))
        self.reserved[name] = [r.get("name", "") for r in status.get("reservedFor") or []]
        before = self.allocation.get(name)
        if before is not None and devices and devices != before:
            self.violations.append(f"claim {name} was allocated again: {before} -> {devices}")
        if before is not None and not devices:
            for device in before:
                if self.holder.get(device) == name:
                    del self.holder[device]
            del self.allocation[name]
        if devices and before is None:
            self.allocations_seen += 1
            for device in devices:
                other = self.holder.get(device)
                if other is not None and other != name:
                    self.violations.append(f"{device} allocated to {other} and to {name}")
                self.holder[device] = name
            self.allocation[name] = devices


def watch_claims(kube: KubeCluster, ns: str, ledger: ClaimLedger,
                 stop: threading.Event) -> None:
    try:
        for event, claim in kube.watch(RESOURCE_CLAIMS, ns, timeout=300):
            if event == "DELETED":
                ledger.see({"metadata": claim["metadata"], "status": {}})
            else:
                ledger.see(claim)
            if stop.is_set():
                return
    except ApiError:
        if not stop.is_set():
            raise


def test_sigkill_while_gangs_with_claims_bind(apiserver: ApiServer, kube: KubeCluster,
                                              kube_namespace: str, env: dict[str, str]) -> None:
    if not apiserver.controller_manager:
        pytest.skip("no kube-controller-manager beside the API server: nothing makes the "
                    "template claims or releases them")
    ns = kube_namespace
    dra = Dra(kube, ns, templates=True)
    ledger = ClaimLedger()
    binds: queue.Queue[tuple[float, str, str]] = queue.Queue()
    stop = threading.Event()
    process: Process | None = None
    try:
        for i in range(NODES):
            dra.node(f"n{i}", DEVICES_PER_NODE)
        gangs = {f"g{i:02d}": size for i, size in enumerate(SIZES)}
        for gang, size in gangs.items():
            kube.create("podgroups", {"metadata": {"name": gang}, "spec": {
                "schedulingPolicy": {"gang": {"minCount": size}}}}, ns)
            for i in range(size):
                dra.pod(f"{gang}-{i}", group=gang)
        threading.Thread(target=watch_claims, args=(kube, ns, ledger, stop),
                         daemon=True).start()
        threading.Thread(target=watch_binds, args=(kube, ns, binds, stop), daemon=True).start()
        bound: dict[str, dict[str, str]] = {g: {} for g in gangs}
        finish_at: dict[str, float] = {}
        finished: set[str] = set()
        process = spawn(env)
        kills = attempts = 0
        deadline = time.monotonic() + 300
        while len(finished) < len(gangs):
            assert time.monotonic() < deadline, (
                f"timed out: finished {sorted(finished)}, bound "
                f"{ {g: len(b) for g, b in bound.items()} }; log tail:\n"
                + "".join(process.log[-30:]))
            assert process.popen.poll() is None, "fluence up exited:\n" + "".join(process.log[-30:])
            try:
                _, pod, node = binds.get(timeout=0.1)
            except queue.Empty:
                pass
            else:
                gang = pod.rsplit("-", 1)[0]
                bound[gang][pod] = node
                partial = 0 < len(bound[gang]) < gangs[gang]
                if partial and kills < KILLS and attempts < ATTEMPTS and gangs[gang] >= 3:
                    process.popen.send_signal(signal.SIGKILL)
                    process.popen.wait()
                    attempts += 1
                    time.sleep(0.1)  # binds sent before the kill reach the watch
                    while not binds.empty():
                        _, pod2, node2 = binds.get()
                        bound[pod2.rsplit("-", 1)[0]][pod2] = node2
                    cut = [g for g, size in gangs.items() if 0 < len(bound[g]) < size]
                    kills += bool(cut)
                    process = spawn(env)
            now = time.monotonic()
            for name, size in gangs.items():
                if len(bound[name]) == size and name not in finish_at:
                    finish_at[name] = now + FINISH_AFTER
            for name, when in list(finish_at.items()):
                if when <= now and name not in finished:
                    _check_gang(dra, name, bound[name])
                    for pod in bound[name]:
                        kube.patch_status("pods", pod, {"status": {"phase": "Succeeded"}}, ns)
                    finished.add(name)
    finally:
        stop.set()
        if process is not None:
            stop_gracefully(process)
        dra.close()
    print(f"\n{len(gangs)} gangs, {sum(gangs.values())} pods with a claim each, "
          f"{attempts} SIGKILLs ({kills} while a gang was bound in part), "
          f"{ledger.allocations_seen} allocations seen on the claims")
    assert kills == KILLS, f"only {kills} of {attempts} kills landed while a gang was bound in part"
    assert not ledger.violations, ledger.violations
    assert ledger.allocations_seen >= sum(gangs.values())


def _check_gang(dra: Dra, gang: str, members: dict[str, str]) -> None:
    """Each member runs where its claim's devices are, with the claim reserved for it."""
    for pod, node in members.items():
        claim = dra.claim_of(pod)
        assert claim is not None, f"{gang}: {pod} bound without its claim"
        name = claim["metadata"]["name"]
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices")
                   or {}).get("results") or []
        devices = [f"{r['pool']}/{r['device']}" for r in results]
        assert devices and all(d.split("/", 1)[0] == node for d in devices), (
            f"{gang}: {pod} on {node}, its claim {name} holds {devices}")
        reserved = [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or []]
        assert reserved == [pod], f"{gang}: claim {name} reserved for {reserved}, not {pod}"
