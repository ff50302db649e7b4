"""The Fluxion matcher's settings: ``FLUENCE_FLUXION_*`` environment variables.

``FLUENCE_FLUXION_LIB`` keeps the name it had while the core held it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings


class FluxionSettings(PluginSettings):
    """Where flux-sched's library is; without it the embedded matcher stays in charge."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_FLUXION_")

    lib: Path | None = Field(
        default=None, description="Path to libreapi_cli.so (or a flux-sched install prefix)."
    )
    numa: bool = Field(
        default=False,
        description=(
            "Load NUMA zones (from NodeResourceTopology) as numanode vertices under the nodes, "
            "so pods annotated single-numa fit one zone. Fluxion then finds a pod's cores "
            "under one vertex only: a pod not asking single-numa cannot span two zones."
        ),
    )
