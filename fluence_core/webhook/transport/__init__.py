"""The webhook's HTTPS transport: TLS, the HTTP/1.1 reader, per-client fairness, the server.

It serves whatever :class:`~fluence_core.webhook.transport.routes.Endpoint` it is given
and knows nothing of admission, so the admission port and the report port share one
hardened server; the webhook's inner import contract keeps every other room out of it.
"""
