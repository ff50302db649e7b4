"""The Fluence scheduler: a process of its own that places pods with ``schedulerName: fluence``."""
