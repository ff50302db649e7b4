"""Entry point ``acme``: contributes the Acme provider through ``fluence_providers``."""

from __future__ import annotations

from fluence_core.api import Provider, hookimpl

from fluence_provider_acme.provider import AcmeProvider


@hookimpl
def fluence_providers() -> list[Provider]:
    return [AcmeProvider()]
