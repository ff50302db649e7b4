"""Entry point ``qrmi``: contributes the QRMI provider."""

from __future__ import annotations

from fluence_core.api import hookimpl

from fluence_qrmi.provider import QrmiProvider


@hookimpl
def fluence_providers() -> list[QrmiProvider]:
    return [QrmiProvider()]
