"""TLS for the webhook: a mounted certificate, or a self-managed CA and serving certificate.

Self-managed (the default): at start the webhook makes a CA and a serving
certificate for its Service DNS names, keeps both in a private directory and
patches the CA into the ``caBundle`` of every webhook of its
MutatingWebhookConfiguration, so the API server trusts it. A restart makes a
new pair and patches again. Needs the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import datetime
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from fluence_core.kube.api import MUTATING_WEBHOOKS, ClusterAPI
from fluence_core.errors import FluenceError
from fluence_core.kube.errors import Conflict, NotFound
from fluence_core.log import logger
from fluence_core.settings import Settings

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"


@dataclass(frozen=True)
class ServingCert:
    cert_file: Path
    key_file: Path
    ca_pem: bytes


def service_dns_names(service: str, namespace: str) -> list[str]:
    """Every name the API server may use to reach ``service`` in ``namespace``."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _new_ca(common_name: str, not_before: datetime.datetime,
            not_after: datetime.datetime) -> tuple[Any, Any]:
    """A self-signed CA's private key and certificate (``cryptography`` objects)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(ca_common_name: str, common_name: str, usage: Any, days: int,
           alt_names: Sequence[Any] = ()) -> tuple[Any, Any, Any]:
    """A new CA, and a key and a leaf certificate for ``common_name`` signed by it for
    ``usage`` (an extended key usage: server or client auth), with ``alt_names`` when given:
    ``(ca_cert, cert, key)``. Both are valid from five minutes ago (clocks drift) for
    ``days``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(minutes=5)
    not_after = now + datetime.timedelta(days=days)
    ca_key, ca_cert = _new_ca(ca_common_name, not_before, not_after)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = (
        builder
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ca_cert, cert, key


def _write(directory: Path, names: tuple[str, str, str], ca_cert: Any, cert: Any,
           key: Any) -> bytes:
    """Write the CA, the certificate and the key (``names``: their files, in that order) into
    ``directory`` as PEM, the key readable by its owner alone; the CA's PEM."""
    from cryptography.hazmat.primitives import serialization

    ca_file, cert_file, key_file = names
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_pem: bytes = ca_cert.public_bytes(pem)
    (directory / ca_file).write_bytes(ca_pem)
    (directory / cert_file).write_bytes(cert.public_bytes(pem))
    key_path = directory / key_file
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca_pem


def generate(dns_names: Sequence[str], directory: Path, *, ip_addresses: Sequence[str] = (),
             days: int = 365) -> ServingCert:
    """Write a new CA and a serving certificate for ``dns_names`` into ``directory``."""
    try:
        import ipaddress

        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID
    except ImportError:  # pragma: no cover - depends on the install
        raise FluenceError("self-managed webhook TLS needs the 'cryptography' package; "
                           "install it or mount a certificate (FLUENCE_WEBHOOK_CERT_DIR)") from None
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    ca_cert, cert, key = _issue("fluence-webhook-ca", dns_names[0],
                                ExtendedKeyUsageOID.SERVER_AUTH, days, alt_names)
    ca_pem = _write(directory, (CA_FILE, CERT_FILE, KEY_FILE), ca_cert, cert, key)
    return ServingCert(directory / CERT_FILE, directory / KEY_FILE, ca_pem)


CLIENT_CERT_FILE = "client.crt"
CLIENT_KEY_FILE = "client.key"
CLIENT_CA_FILE = "client-ca.crt"


@dataclass(frozen=True)
class ClientCert:
    """A client certificate, its key, and the CA that signed it (what the webhook trusts)."""

    cert_file: Path
    key_file: Path
    ca_file: Path


def generate_client(common_name: str, directory: Path, *, days: int = 365) -> ClientCert:
    """Write a new CA and a client certificate for ``common_name`` (signed by it) into
    ``directory``: the API server presents the certificate, the webhook is given the CA
    (``FLUENCE_WEBHOOK_CLIENT_CA``). For tests and trials; in production the operator's own
    PKI makes them (docs/webhook-client-auth.md)."""
    try:
        from cryptography.x509.oid import ExtendedKeyUsageOID
    except ImportError:  # pragma: no cover - depends on the install
        raise FluenceError("making a client certificate needs the 'cryptography' package")
    ca_cert, cert, key = _issue("fluence-webhook-client-ca", common_name,
                                ExtendedKeyUsageOID.CLIENT_AUTH, days)
    _write(directory, (CLIENT_CA_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE), ca_cert, cert, key)
    return ClientCert(directory / CLIENT_CERT_FILE, directory / CLIENT_KEY_FILE,
                      directory / CLIENT_CA_FILE)


def mounted(directory: Path) -> ServingCert:
    """A certificate someone else manages (cert-manager, a Secret): tls.crt, tls.key, ca.crt."""
    cert, key = directory / CERT_FILE, directory / KEY_FILE
    for path in (cert, key):
        if not path.is_file():
            raise FluenceError(f"FLUENCE_WEBHOOK_CERT_DIR={directory}: {path.name} is missing")
    ca = directory / CA_FILE
    return ServingCert(cert, key, ca.read_bytes() if ca.is_file() else b"")


def patch_ca_bundle(cluster: ClusterAPI, config_name: str, ca_pem: bytes, *,
                    attempts: int = 30, delay: float = 2.0) -> int:
    """Put ``ca_pem`` into every webhook of the MutatingWebhookConfiguration; returns how many.

    The configuration may be applied after the webhook starts, so a missing one
    is waited for (``attempts`` x ``delay``); a conflict is retried.
    """
    bundle = base64.b64encode(ca_pem).decode()
    for attempt in range(attempts):
        try:
            config = cluster.get(MUTATING_WEBHOOKS, config_name)
            if config is None:
                raise NotFound(404, f"mutatingwebhookconfigurations {config_name} not found")
            webhooks = config.get("webhooks") or []
            ops = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
                    for i in range(len(webhooks))]
            if webhooks:
                cluster.patch(MUTATING_WEBHOOKS, config_name, ops, patch_type="json")
            logger.info("webhook: caBundle set on %d webhook(s) of %s", len(webhooks), config_name)
            return len(webhooks)
        except (NotFound, Conflict) as error:
            logger.info(
                "webhook: waiting for MutatingWebhookConfiguration %s (%s)", config_name, error
            )
        time.sleep(delay)
    raise FluenceError(
        f"MutatingWebhookConfiguration {config_name} never appeared; caBundle not set"
    )


def bootstrap(settings: Settings, cluster: ClusterAPI | None) -> ServingCert:
    """The certificate to serve with: mounted if configured, else generated and published."""
    if settings.webhook.cert_dir is not None:
        logger.info("webhook: serving the mounted certificate in %s", settings.webhook.cert_dir)
        return mounted(settings.webhook.cert_dir)
    directory = Path(tempfile.mkdtemp(prefix="fluence-webhook-tls-"))
    os.chmod(directory, 0o700)
    names = service_dns_names(settings.webhook.service, settings.webhook.namespace)
    serving = generate(names, directory)
    logger.info("webhook: generated a CA and a serving certificate for %s", ", ".join(names))
    if cluster is None:
        logger.warning("webhook: no cluster connection; caBundle not patched (CA in %s)", directory)
    else:
        patch_ca_bundle(cluster, settings.webhook.config, serving.ca_pem)
    return serving
