"""The QPU DRA driver: ``resources.yaml`` backends published as network-attached DRA devices."""
