"""The local cluster's stand-in DNS answers Service names from the API, and nothing else."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Any

spec = importlib.util.spec_from_file_location(
    "cluster_dns", Path(__file__).resolve().parent / "cluster_dns.py")
assert spec is not None and spec.loader is not None
cluster_dns = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cluster_dns)


class FakeApi:
    """The API server's answers for one ClusterIP Service and one headless Service."""

    def get(self, path: str) -> dict[str, Any] | None:
        if path == "/api/v1/namespaces/fluence-system/services/fluence-webhook":
            return {"spec": {"clusterIP": "10.96.0.20"}}
        if path == "/api/v1/namespaces/work/services/brokers":
            return {"spec": {"clusterIP": "None"}}
        if path.startswith("/apis/discovery.k8s.io/v1/namespaces/work/endpointslices"):
            return {"items": [{"addressType": "IPv4", "endpoints": [
                {"hostname": "flux-0", "addresses": ["10.244.1.5"],
                 "conditions": {"ready": True}},
                {"hostname": "flux-1", "addresses": ["10.244.2.7"],
                 "conditions": {"ready": False}}]}]}
        return None


def query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(label)]) + label.encode() for label in name.split("."))
    return (struct.pack("!HHHHHH", 0xBEEF, 0x0100, 1, 0, 0, 0) + labels + b"\0"
            + struct.pack("!HH", qtype, 1))


def resolve(name: str, qtype: int = 1) -> tuple[int, list[str]]:
    reply = cluster_dns.answer(query(name, qtype), FakeApi(), "cluster.local")
    ident, flags, _, count, _, _ = struct.unpack("!HHHHHH", reply[:12])
    assert ident == 0xBEEF
    records = reply[len(query(name, qtype)):]
    addresses = [".".join(str(b) for b in records[16 * i + 12:16 * i + 16]) for i in range(count)]
    return flags & 0xF, addresses


def test_a_service_name_resolves_to_its_cluster_ip_with_or_without_the_domain() -> None:
    assert resolve("fluence-webhook.fluence-system.svc") == (0, ["10.96.0.20"])
    assert resolve("fluence-webhook.fluence-system.svc.cluster.local") == (0, ["10.96.0.20"])


def test_a_headless_service_gives_its_ready_endpoints_and_each_hostname_its_own() -> None:
    assert resolve("brokers.work.svc.cluster.local") == (0, ["10.244.1.5"])
    assert resolve("flux-1.brokers.work.svc.cluster.local") == (0, ["10.244.2.7"])


def test_unknown_names_and_search_list_guesses_do_not_exist() -> None:
    assert resolve("nothing.work.svc.cluster.local") == (3, [])
    assert resolve("fluence-webhook.fluence-system.svc.work.svc.cluster.local") == (3, [])
    assert resolve("example.org") == (3, [])


def test_an_ipv6_question_about_a_known_name_is_answered_empty() -> None:
    assert resolve("fluence-webhook.fluence-system.svc", qtype=28) == (0, [])
