"""Gives every namespace the ConfigMap an OpenShift-derived kube-apiserver expects.

The Kubernetes 1.36 binaries on the machine this tier was written on are built from
OpenShift's fork, whose ServiceAccount admission adds a projection of ConfigMap
``openshift-service-ca.crt`` (key ``service-ca.crt``) to every pod's token volume.
Upstream Kubernetes does not, and nothing but OpenShift's service-CA operator makes
that ConfigMap, so without it no pod with a token starts ("configmap not found").
This watches namespaces and makes it in each, holding the cluster's CA (harmless on
an upstream API server, where no pod reads it). Standard library only; written for
this project.
"""

from __future__ import annotations

import argparse
import json
import ssl
import time
import urllib.error
import urllib.request

NAME = "openshift-service-ca.crt"


class Api:
    def __init__(self, server: str, ca: str, token: str) -> None:
        self.server = server.rstrip("/")
        self.context = ssl.create_default_context(cafile=ca)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def open(self, path: str, body: dict[str, object] | None = None,
             timeout: float = 10) -> object:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, headers=self.headers,
                                         method="POST" if body is not None else "GET")
        return urllib.request.urlopen(request, context=self.context, timeout=timeout)


def ensure(api: Api, namespace: str, ca_pem: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": namespace},
            "data": {"service-ca.crt": ca_pem}}
    try:
        api.open(f"/api/v1/namespaces/{namespace}/configmaps", body).close()  # type: ignore[attr-defined]
        print(f"made {namespace}/{NAME}", flush=True)
    except urllib.error.HTTPError as error:
        if error.code not in (409, 403, 404):  # exists, or the namespace is terminating
            raise


def run(api: Api, ca_pem: str) -> None:
    with api.open("/api/v1/namespaces") as response:  # type: ignore[attr-defined]
        listed = json.load(response)
    for item in listed["items"]:
        ensure(api, item["metadata"]["name"], ca_pem)
    version = listed["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces?watch=1&resourceVersion={version}&timeoutSeconds=300"
    with api.open(path, timeout=330) as stream:  # type: ignore[attr-defined]
        for line in stream:
            event = json.loads(line)
            if event["type"] == "ADDED":
                ensure(api, event["object"]["metadata"]["name"], ca_pem)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--token", required=True)
    options = parser.parse_args()
    api = Api(options.server, options.ca, options.token)
    ca_pem = open(options.ca).read()
    while True:
        try:
            run(api, ca_pem)
        except (OSError, ValueError, KeyError) as error:
            print(f"watch ended ({error}); again in 1 s", flush=True)
            time.sleep(1)


if __name__ == "__main__":
    main()
