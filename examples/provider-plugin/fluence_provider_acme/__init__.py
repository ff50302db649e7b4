"""An example Fluence provider for the (fictional) Acme Quantum cloud."""

from fluence_provider_acme.provider import AcmeProvider, AcmeTask

__all__ = ["AcmeProvider", "AcmeTask"]
