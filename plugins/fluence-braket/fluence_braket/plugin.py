"""Entry point ``braket``: contributes the Braket provider."""

from __future__ import annotations

from fluence_core.api import hookimpl

from fluence_braket.provider import BraketProvider


@hookimpl
def fluence_providers() -> list[BraketProvider]:
    return [BraketProvider()]
