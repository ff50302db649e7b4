"""Run a Flux cluster inside a user's Indexed Job or JobSet (see README.md)."""

from fluence_flux.handler import FluxHandler
from fluence_flux.settings import FluxSettings

__all__ = ["FluxHandler", "FluxSettings"]
