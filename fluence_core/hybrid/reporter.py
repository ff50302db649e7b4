"""How the sidecar reports to Fluence: HTTPS to the webhook's endpoint, or in process.

The sidecar holds no Kubernetes rights (docs/scout-report.md). :class:`HttpsReporter`
is what ``fluence sidecar`` uses in a pod: it POSTs each report to
``FLUENCE_REPORT_URL`` with the projected ServiceAccount token the webhook mounted
(read again for every report: the kubelet rotates it) and trusts only the CA the
webhook injected (``FLUENCE_REPORT_CA``). :class:`LocalReporter` applies the same
reports in process against a :class:`~fluence_core.kube.api.ClusterAPI`, for
``fluence sim`` and tests, where there is no HTTPS endpoint and no token to check.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from fluence_core.kube.api import PODS, ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import ApiError
from fluence_core.hybrid.release import apply_report, parse_report

TIMEOUT = 10.0
"""Seconds one report may take."""


class ReportError(FluenceError):
    """A report did not get through; the sidecar sends it again."""


@runtime_checkable
class Reporter(Protocol):
    """Sends one report (``event`` plus the fields of docs/scout-report.md); the reply."""

    def report(self, event: str, payload: Mapping[str, Any]) -> dict[str, Any]: ...


class HttpsReporter:
    """Reports over HTTPS with a bearer token from ``token_file``, trusting ``ca_pem``."""

    def __init__(self, url: str, token_file: Path, ca_pem: str | None = None, *,
                 timeout: float = TIMEOUT) -> None:
        if not url.startswith("https://"):
            raise FluenceError(f"FLUENCE_REPORT_URL={url!r}: the report endpoint must be https")
        self.url = url
        self.token_file = token_file
        self.timeout = timeout
        try:
            self.context = ssl.create_default_context(cadata=ca_pem or None)
        except (ssl.SSLError, ValueError) as error:
            raise FluenceError(f"FLUENCE_REPORT_CA is not a PEM certificate: {error}") from None

    @classmethod
    def from_settings(cls, settings: Any) -> "HttpsReporter":
        return cls(settings.hybrid.report_url, settings.sidecar.report_token_file,
                   settings.hybrid.report_ca)

    def report(self, event: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        try:
            token = self.token_file.read_text().strip()
        except OSError as error:
            raise ReportError(f"cannot read the report token {self.token_file}: {error}") from None
        request = urllib.request.Request(
            self.url, data=json.dumps({**payload, "event": event}).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout,
                                        context=self.context) as response:
                reply: dict[str, Any] = json.loads(response.read() or b"{}")
                return reply
        except urllib.error.HTTPError as error:
            try:
                detail = json.loads(error.read()).get("error")
            except (ValueError, AttributeError, OSError):
                detail = error.reason
            raise ReportError(f"{self.url} refused the {event} report ({error.code}): "
                              f"{detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise ReportError(f"{self.url}: the {event} report failed: {error}") from None


class LocalReporter:
    """Applies reports in process for the scout ``namespace/pod_name`` (``fluence sim``,
    tests): the same actions as the endpoint, without the HTTPS hop and token check."""

    def __init__(self, cluster: ClusterAPI, namespace: str, pod_name: str, gate: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.pod_name = pod_name
        self.gate = gate

    def report(self, event: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        try:
            scout = self.cluster.get(PODS, self.pod_name, self.namespace)
            if scout is None:
                raise ReportError(f"pod {self.namespace}/{self.pod_name} not found")
            return apply_report(self.cluster, scout, parse_report({**payload, "event": event}),
                                self.gate)
        except ApiError as error:
            raise ReportError(f"the {event} report failed: {error}") from None
