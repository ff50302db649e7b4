"""Operator settings of the flux handler: ``FLUENCE_FLUX_*`` environment variables.

Per-workload settings (tasks per node, queue policy, network device) live on
the Job or JobSet as annotations instead; see :mod:`fluence_flux.workload`.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings

DEFAULT_VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"


class FluxSettings(PluginSettings):
    """What the webhook's operator chooses for every Flux workload."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_FLUX_")

    view_image: str = Field(
        default=DEFAULT_VIEW_IMAGE,
        description="Image of the init container holding the Flux install (a flux view).",
    )
    view_path: str = Field(
        default="/opt/view", description="Where the flux view lives in that image."
    )
    shm_size: str = Field(default="1Gi", description="sizeLimit of the memory-backed /dev/shm.")
    node_affinity: str = Field(
        default="",
        description="Required node affinity, comma-separated key=value terms "
        "(values joined by '|').",
    )
    broker_port: int = Field(default=8050, ge=1, le=65535, description="TCP port the brokers use.")
    start_timeout: int = Field(
        default=600, ge=1,
        description="Seconds rank 0 waits for every broker to join before it fails the Job "
                    "(a rank whose pod never starts must not hang the instance).",
    )


def load_flux_settings(**overrides: object) -> FluxSettings:
    return FluxSettings.load(**overrides)
