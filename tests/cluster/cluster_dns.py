"""A stand-in for cluster DNS on the local cluster (tests/cluster/local-cluster.sh).

Pods reach Services by name (the scouts' sidecars post to
``fluence-webhook.fluence-system.svc``; Flux brokers find each other as
``<pod hostname>.<headless service>.<namespace>.svc``), and this machine has no
CoreDNS image to run. This answers A queries over UDP for exactly those names,
asking the API server on every query (no cache, so a Service made a moment ago
resolves): ``<service>.<namespace>.svc[.cluster.local]`` gives the ClusterIP, or
a headless Service's ready endpoints; ``<hostname>.<service>.<namespace>.svc...``
gives the endpoint with that hostname. Any other name is NXDOMAIN: pods here
have no outside network to resolve for. Standard library only, so the host's
python3 runs it. Written for this project.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import ssl
import struct
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

A, AAAA, IN = 1, 28, 1
NOERROR, FORMERR, NXDOMAIN = 0, 1, 3
TTL = 5


class Api:
    """GETs against the API server with a bearer token."""

    def __init__(self, server: str, ca: str, token: str) -> None:
        self.server = server.rstrip("/")
        self.context = ssl.create_default_context(cafile=ca)
        self.token = token

    def get(self, path: str) -> dict[str, Any] | None:
        request = urllib.request.Request(self.server + path,
                                          headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=3) as response:
                found: dict[str, Any] = json.load(response)
                return found
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise


def service_addresses(api: Api, namespace: str, service: str, hostname: str | None) -> list[str]:
    """The A records of a service name (or of one endpoint of it, by hostname)."""
    quoted = urllib.parse.quote
    found = api.get(f"/api/v1/namespaces/{quoted(namespace)}/services/{quoted(service)}")
    if found is None:
        return []
    cluster_ip = found.get("spec", {}).get("clusterIP")
    if hostname is None and cluster_ip and cluster_ip != "None":
        return [cluster_ip]
    selector = urllib.parse.quote(f"kubernetes.io/service-name={service}")
    slices = api.get(f"/apis/discovery.k8s.io/v1/namespaces/{quoted(namespace)}"
                     f"/endpointslices?labelSelector={selector}") or {}
    addresses = []
    for each in slices.get("items", []):
        if each.get("addressType") != "IPv4":
            continue
        for endpoint in each.get("endpoints") or []:
            if hostname is not None and endpoint.get("hostname") != hostname:
                continue
            if hostname is None and endpoint.get("conditions", {}).get("ready") is False:
                continue
            addresses.extend(endpoint.get("addresses", []))
    return sorted(set(addresses))


def lookup(api: Api, name: str, domain: str) -> list[str] | None:
    """Addresses for ``name``; None when the name does not exist."""
    labels = name.lower().rstrip(".").split(".")
    suffix = domain.split(".")
    if labels[-len(suffix):] == suffix:
        labels = labels[:-len(suffix)]
    if not labels or labels[-1] != "svc" or len(labels) not in (3, 4):
        return None
    if len(labels) == 3:
        service, namespace, hostname = labels[0], labels[1], None
    else:
        hostname, service, namespace = labels[0], labels[1], labels[2]
    addresses = service_addresses(api, namespace, service, hostname)
    return addresses or None


def parse_question(packet: bytes) -> tuple[int, int, str, int, int, int]:
    """The id, flags, name, type, class of the query, and where the question ends."""
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1:
        raise ValueError("one question expected")
    at, labels = 12, []
    while packet[at]:
        length = packet[at]
        labels.append(packet[at + 1:at + 1 + length].decode("ascii"))
        at += 1 + length
    at += 1
    qtype, qclass = struct.unpack("!HH", packet[at:at + 4])
    return ident, flags, ".".join(labels), qtype, qclass, at + 4


def answer(packet: bytes, api: Api, domain: str) -> bytes:
    try:
        ident, flags, name, qtype, qclass, end = parse_question(packet)
    except (ValueError, IndexError, struct.error, UnicodeDecodeError):
        return struct.pack("!HHHHHH", int.from_bytes(packet[:2] or b"\0\0", "big"),
                           0x8000 | FORMERR, 0, 0, 0, 0)
    question = packet[12:end]
    try:
        addresses = lookup(api, name, domain)
        rcode = NXDOMAIN if addresses is None else NOERROR
    except (OSError, ValueError):
        addresses, rcode = None, 2  # SERVFAIL: the API server did not answer
    records = b""
    if addresses and qtype == A and qclass == IN:
        for address in addresses:
            records += struct.pack("!HHHIH", 0xC00C, A, IN, TTL, 4)
            records += ipaddress.IPv4Address(address).packed
    count = len(addresses) if records else 0
    header = struct.pack("!HHHHHH", ident, 0x8400 | (flags & 0x0100) | rcode, 1, count, 0, 0)
    return header + question + records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--domain", default="cluster.local")
    options = parser.parse_args()
    api = Api(options.server, options.ca, options.token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((options.listen, options.port))
    print(f"cluster DNS on {options.listen}:{options.port} for *.svc.{options.domain}", flush=True)
    while True:
        packet, client = sock.recvfrom(512)
        reply = answer(packet, api, options.domain)
        sock.sendto(reply, client)


if __name__ == "__main__":
    main()
