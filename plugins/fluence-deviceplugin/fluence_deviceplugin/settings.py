"""The device plugin's settings: ``FLUENCE_DEVICE_PLUGIN_*`` environment variables.

``FLUENCE_DEVICE_PLUGIN_DIR`` keeps its name; ``FLUENCE_RESOURCE_CAPACITY``, the
name the capacity had while the core held it, is still read (the new name wins
when both are set). Which types to advertise comes from the core's
``FLUENCE_RESOURCES``, the file the scheduler reads too.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings


class DevicePluginSettings(PluginSettings):
    """Where the kubelet listens and how many devices of each type a node advertises."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_DEVICE_PLUGIN_")

    dir: Path = Field(
        default=Path("/var/lib/kubelet/device-plugins"),
        description="The kubelet's device-plugins directory (registration socket lives here).",
    )
    capacity: int = Field(
        default=1000,
        ge=1,
        validation_alias=AliasChoices(
            "FLUENCE_DEVICE_PLUGIN_CAPACITY", "FLUENCE_RESOURCE_CAPACITY"
        ),
        description="Per-node count advertised for each virtual type.",
    )
