"""The driver's loop: reread the resources file, reconcile the slices, wait, again.

Each pass reads the file anew (a ConfigMap's symlink swap or an edit in place
look the same) and hands it to the publisher, which changes nothing while the
file and the slices agree. A file that stops validating after a good one is
logged and the slices it published stay: a driver that withdrew every backend
because of a typo would strand every pod waiting for one. An API error is
logged and the next pass tries again.
"""

from __future__ import annotations

import threading
from pathlib import Path

from fluence_core.api import (
    ApiError, FluenceError, ResourceConfig, load_resource_config, logger,
)
from fluence_dra_qpu.publisher import PublishResult, SlicePublisher


class QpuDriver:
    """Publishes ``resources`` through ``publisher`` every ``interval`` seconds."""

    def __init__(self, publisher: SlicePublisher, resources: Path | None,
                 interval: float) -> None:
        self.publisher = publisher
        self.resources = resources
        self.interval = interval
        self.passes = 0
        """Passes finished (tests wait on it rather than sleep)."""
        self._config: ResourceConfig | None = None

    def load(self) -> ResourceConfig:
        """The file as it is now; a bad file raises :class:`FluenceError` naming it."""
        self._config = load_resource_config(self.resources)
        return self._config

    def step(self) -> PublishResult | None:
        """One pass; None when nothing could be published this time."""
        try:
            config = self.load()
        except FluenceError as error:
            if self._config is None:
                raise
            logger.error("qpu driver: %s; the slices published before stay", error)
            config = self._config
        try:
            return self.publisher.publish(config)
        except ApiError as error:
            logger.error("qpu driver: publishing failed (%s); trying again in %s s",
                         error, self.interval)
            return None
        finally:
            self.passes += 1

    def run(self, stop: threading.Event) -> None:
        """Pass after pass until ``stop`` is set."""
        while not stop.is_set():
            self.step()
            stop.wait(self.interval)
