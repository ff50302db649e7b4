"""Every ``FLUENCE_*`` setting, in one pydantic-settings class.

A bad value fails with a message naming the variable, so an operator knows which
line of a Deployment to fix.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from fluence_core import names
from fluence_core.errors import SettingsError


class MatchPolicy(str, Enum):
    """Fluxion's match policies; each means here what it means in Fluxion."""

    FIRST = "first"
    LOW = "low"
    HIGH = "high"
    LONODE = "lonode"
    HINODE = "hinode"


class Switch(str, Enum):
    ON = "on"
    OFF = "off"


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Fluence's configuration, read from ``FLUENCE_*`` environment variables."""

    model_config = SettingsConfigDict(
        env_prefix=names.SETTINGS_ENV_PREFIX,
        case_sensitive=False,
        extra="ignore",
        env_ignore_empty=True,  # FLUENCE_RESOURCES="" means absent, not the directory "."
    )

    resources: Path | None = Field(
        default=None, description="Path to resources.yaml; absent means classical resources only."
    )
    match_policy: MatchPolicy = Field(default=MatchPolicy.FIRST, description="Matcher policy.")
    resource_capacity: int = Field(
        default=1000, ge=1, description="Per-node count the device plugin advertises for each virtual type."
    )
    admission: Switch = Field(default=Switch.ON, description="Admission control for hybrid groups.")
    reserve_cores: int = Field(default=0, ge=0, description="Cores admission control keeps free.")
    worker_timeout: float = Field(
        default=0, ge=0, description="Seconds the sidecar waits for workers; 0 waits forever."
    )
    session_hold_timeout: float = Field(
        default=0, ge=0, description="Seconds the scout holds its session; 0 holds forever."
    )
    disable_plugins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated plugin names never to load."
    )
    fluxion_lib: Path | None = Field(
        default=None, description="Path to libreapi_cli.so (or a flux-sched install prefix)."
    )
    memory_chunks_per_core: int = Field(
        default=1, ge=1, description="Memory vertices per core in the graph."
    )
    kube_qps: float = Field(default=20.0, gt=0, description="API requests per second (token bucket).")
    kube_burst: int = Field(default=40, ge=1, description="Token bucket burst size.")
    device_plugin_dir: Path = Field(
        default=Path("/var/lib/kubelet/device-plugins"),
        description="The kubelet's device-plugins directory (registration socket lives here).",
    )
    log_level: str = Field(default="INFO", description="Log level of the fluence logger.")

    _split_disable = field_validator("disable_plugins", mode="before")(_split_csv)


def _describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else "?"
        variable = names.SETTINGS_ENV_PREFIX + field.upper()
        lines.append(f"{variable}={problem.get('input')!r}: {problem['msg']}")
    return "invalid Fluence settings: " + "; ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning validation failures into a :class:`SettingsError`."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None
