"""Fluxion (flux-sched ``reapi_cli``) as a Fluence matcher."""
