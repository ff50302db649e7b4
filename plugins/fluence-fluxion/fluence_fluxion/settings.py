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
