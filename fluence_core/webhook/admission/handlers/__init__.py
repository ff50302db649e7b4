"""The built-in webhook handlers, one module each, named as the handler.

Each module holds its :class:`~fluence_core.webhook.admission.base.Handler` and the
``fluence_webhook_handlers`` hookimpl that contributes it, and is registered by one
``webhook-<name>`` entry point, exactly as a plugin's handler would be.
"""
