"""The Fluxion matcher's settings: ``FLUENCE_FLUXION_*`` environment variables.

``FLUENCE_FLUXION_LIB`` keeps the name it had while the core held it.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings, ZoneLoad


class FluxionSettings(PluginSettings):
    """Where flux-sched's library is; without it the embedded matcher stays in charge."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_FLUXION_")

    lib: Path | None = Field(
        default=None, description="Path to libreapi_cli.so (or a flux-sched install prefix)."
    )
    numa: ZoneLoad = Field(
        default=ZoneLoad.POLICY,
        description=(
            "Which nodes' NUMA zones (from NodeResourceTopology) Fluxion gets as numanode "
            "vertices: 'policy' (nodes whose kubelet enforces single-numa-node), 'all', or "
            "'none'. Fluxion finds a pod's cores under one vertex, so on a node whose zones "
            "are loaded every whole-core pod stays inside one zone; pods annotated "
            "single-numa go only to such nodes. 'true'/'false' (the old switch) mean "
            "'all'/'none'."
        ),
    )

    @field_validator("numa", mode="before")
    @classmethod
    def _old_switch(cls, value: Any) -> Any:
        """``true``/``false``, as the switch was first written, still mean all/none."""
        if isinstance(value, bool):
            return ZoneLoad.ALL if value else ZoneLoad.NONE
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return ZoneLoad.ALL if value.strip().lower() == "true" else ZoneLoad.NONE
        return value
