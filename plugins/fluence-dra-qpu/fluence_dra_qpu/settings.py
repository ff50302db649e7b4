"""The driver's settings: ``FLUENCE_QPU_DRIVER_*`` environment variables.

Which backends to publish comes from the core's ``FLUENCE_RESOURCES``, the file
the scheduler and the device plugin read too, so the three never disagree.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings


class QpuDriverSettings(PluginSettings):
    """How often the driver rereads the file; where the kubelet plugin's sockets and specs go."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_QPU_DRIVER_")

    interval: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="Seconds between two passes: reread the resources file, repair the slices.",
    )
    registry_dir: Path = Field(
        default=Path("/var/lib/kubelet/plugins_registry"),
        description="The kubelet's plugin registration directory (the kubelet plugin's "
        "registration socket).",
    )
    plugin_dir: Path = Field(
        default=Path("/var/lib/kubelet/plugins/qpu.fluxion.flux-framework.org"),
        description="Where the kubelet plugin serves the DRA API (dra.sock).",
    )
    cdi_dir: Path = Field(
        default=Path("/var/run/cdi"),
        description="Where the kubelet plugin writes a CDI spec per prepared claim.",
    )
