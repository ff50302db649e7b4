"""Admission control's settings: ``FLUENCE_ADMISSION_*`` environment variables.

The names these had while the core kept them, ``FLUENCE_ADMISSION`` and
``FLUENCE_RESERVE_CORES``, are still read (the new name wins when both are set).
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import SettingsConfigDict

from fluence_core.api import PluginSettings, Switch


class AdmissionSettings(PluginSettings):
    """Whether admission control judges hybrid groups, and what it keeps free."""

    model_config = SettingsConfigDict(env_prefix="FLUENCE_ADMISSION_")

    control: Switch = Field(
        default=Switch.ON,
        validation_alias=AliasChoices("FLUENCE_ADMISSION_CONTROL", "FLUENCE_ADMISSION"),
        description="Admission control for hybrid groups (off admits everything).",
    )
    reserve_cores: int = Field(
        default=0, ge=0,
        validation_alias=AliasChoices("FLUENCE_ADMISSION_RESERVE_CORES", "FLUENCE_RESERVE_CORES"),
        description="Cores admission control keeps free.",
    )

    @field_validator("control", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        """``OFF`` and ``off`` alike."""
        return value.strip().lower() if isinstance(value, str) else value
