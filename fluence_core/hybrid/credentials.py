"""The scout sidecar's credentials: the same ``env`` and ``envFrom`` as the app that submits.

Vendor SDKs read their credentials from the environment (``AWS_ACCESS_KEY_ID``,
``QISKIT_IBM_TOKEN``...), which the user fills from Secrets. The sidecar asks the
vendor about the very task the app submitted, so it needs the same ones. The
webhook copies the *references* (``secretKeyRef``, ``secretRef``...), so the kubelet
resolves them in the sidecar exactly as in the app: the webhook never reads a
Secret, and the sidecar sees nothing the pod could not already mount.

The annotation :data:`~fluence_core.names.SIDECAR_CREDENTIALS_ANNOTATION` narrows the
copy to named Secrets (``aws-creds``) or Secret keys (``ibm-quantum/token``), or turns
it off (``none``). Identity that comes from the ServiceAccount (IRSA, workload
identity) needs nothing here: the pod keeps its own.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.kube.meta import annotations_of
from fluence_core.webhook import pod_fields
from fluence_core.webhook.admission.base import AdmissionDenied

_SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")


@dataclass(frozen=True)
class Selection:
    """What of the app's env the sidecar gets: everything, or these Secrets and keys."""

    everything: bool = True
    secrets: frozenset[str] = frozenset()
    keys: frozenset[tuple[str, str]] = frozenset()


def parse_selection(value: str | None) -> Selection | None:
    """The annotation's meaning: None for ``none``; a bad entry is refused by name."""
    if value is None or not value.strip():
        return Selection()
    if value.strip().lower() == names.SIDECAR_CREDENTIALS_NONE:
        return None
    secrets: set[str] = set()
    keys: set[tuple[str, str]] = set()
    for raw in value.split(","):
        entry = raw.strip()
        secret, slash, key = entry.partition("/")
        good_secret = len(secret) <= 253 and _SECRET_NAME.fullmatch(secret) is not None
        good_key = not slash or (len(key) <= 253 and _SECRET_KEY.fullmatch(key) is not None)
        if not entry or not good_secret or not good_key:
            raise AdmissionDenied(
                f"annotation {names.SIDECAR_CREDENTIALS_ANNOTATION}: {entry!r} is not a Secret"
                f" name or <secret>/<key> (expected '{names.SIDECAR_CREDENTIALS_NONE}' or a"
                " comma-separated list such as 'aws-creds,ibm-quantum/token')"
            )
        if slash:
            keys.add((secret, key))
        else:
            secrets.add(secret)
    return Selection(False, frozenset(secrets), frozenset(keys))


def source_container(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container that submits the task: the one asking for the virtual resource, else
    kubectl's default container, else the first."""
    containers = pod_fields.containers(pod)
    for container in containers:
        if pod_fields.virtual_requests(container):
            return container
    chosen = annotations_of(pod).get(names.DEFAULT_CONTAINER_ANNOTATION)
    named = [c for c in containers if c.get("name") == chosen]
    return named[0] if named else (containers[0] if containers else None)


@dataclass
class Copied:
    """The sidecar's share of the app's environment, and what the user should hear."""

    env: list[dict[str, Any]]
    env_from: list[dict[str, Any]]
    warnings: list[str]


def _secret_ref(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
    if not isinstance(ref, Mapping):
        return None
    return str(ref.get("name") or ""), str(ref.get("key") or "")


def copy_credentials(pod: Mapping[str, Any], own: Collection[str]) -> Copied:
    """The ``env`` and ``envFrom`` entries to give the sidecar; ``own`` are the variables the
    sidecar sets itself, which an app entry of the same name never replaces."""
    selection = parse_selection(
        annotations_of(pod).get(names.SIDECAR_CREDENTIALS_ANNOTATION)
    )
    app = source_container(pod)
    if selection is None or app is None:
        return Copied([], [], [])
    app_name = str(app.get("name") or "")
    env = [copy.deepcopy(dict(e)) for e in app.get("env") or [] if e.get("name") not in own]
    env_from = [copy.deepcopy(dict(e)) for e in app.get("envFrom") or []]
    if selection.everything:
        for entry in env:
            field_ref = (entry.get("valueFrom") or {}).get("resourceFieldRef")
            if isinstance(field_ref, dict) and not field_ref.get("containerName"):
                field_ref["containerName"] = app_name  # the app's limits, not the sidecar's
        return Copied(env, env_from, [])
    kept = [
        e for e in env
        if (ref := _secret_ref(e)) is not None
        and (ref[0] in selection.secrets or ref in selection.keys)
    ]
    kept_from = [
        e for e in env_from
        if (e.get("secretRef") or {}).get("name") in selection.secrets
    ]
    whole = {
        str(e["secretRef"].get("name")): e
        for e in env_from if isinstance(e.get("secretRef"), Mapping)
    }
    covered = {_secret_ref(e) for e in kept}
    warnings = []
    for secret, key in sorted(selection.keys - covered):
        source = whole.get(secret)
        variable = str((source or {}).get("prefix") or "") + key
        if source is None or variable in own:
            warnings.append(
                f"{names.SIDECAR_CREDENTIALS_ANNOTATION}: container {app_name!r} does not read"
                f" key {key!r} of Secret {secret!r}; the sidecar does not get it"
            )
            continue
        key_ref: dict[str, Any] = {"name": secret, "key": key}
        if source["secretRef"].get("optional"):
            key_ref["optional"] = True
        kept.append({"name": variable, "valueFrom": {"secretKeyRef": key_ref}})
    used = {ref[0] for e in env if (ref := _secret_ref(e)) is not None} | set(whole)
    for secret in sorted(selection.secrets - used):
        warnings.append(f"{names.SIDECAR_CREDENTIALS_ANNOTATION}: container {app_name!r} does not"
                        f" read Secret {secret!r}; the sidecar does not get it")
    return Copied(kept, kept_from, warnings)
