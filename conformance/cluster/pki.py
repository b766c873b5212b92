"""Certificates and keys for a throwaway cluster, made with ``cryptography``.

One CA per cluster signs the kube-apiserver's serving certificate and one client certificate per
component (so RBAC sees ``system:kube-controller-manager`` and ``system:kube-scheduler`` as in a
real cluster), plus serving certificates for webhooks (the reference controller's admission
webhook is called by the apiserver on 127.0.0.1). ECDSA P-256 keys: as strong as RSA-3072 for a
test cluster and generated in a millisecond, which matters for the 10-second start budget.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    """PEM paths of a certificate and its private key."""

    cert: Path
    key: Path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, private: bool) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


class CertificateAuthority:
    """A CA kept in memory (and on disk) that issues the cluster's certificates."""

    def __init__(self, directory: Path, common_name: str = "kthena-conformance-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pair = KeyPair(directory / "ca.crt", directory / "ca.key")
        _write(self.pair.cert, self.cert_pem, private=False)
        _write(self.pair.key, _key_pem(self._key), private=True)

    @classmethod
    def load(cls, directory: Path) -> CertificateAuthority:
        """The CA a cluster was made with, read back from ``ca.crt`` and ``ca.key`` in ``directory``
        (to issue more certificates for it later, e.g. a real node's)."""
        ca = cls.__new__(cls)
        ca.directory = directory
        ca.pair = KeyPair(directory / "ca.crt", directory / "ca.key")
        key = serialization.load_pem_private_key(ca.pair.key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{ca.pair.key}: not an EC private key")
        ca._key = key
        ca._cert = x509.load_pem_x509_certificate(ca.pair.cert.read_bytes())
        return ca

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organization: str | None = None,
        hosts: tuple[str, ...] = (),
        client: bool = False,
        server: bool = False,
    ) -> KeyPair:
        """Issue ``<name>.crt``/``<name>.key`` for a client, a server, or both."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + (
            [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(min(now + VALIDITY, self._cert.not_valid_after_utc))  # never outlives its CA
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if usages:  # RFC 5280: an extendedKeyUsage extension must list at least one purpose
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        _write(pair.cert, cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(pair.key, _key_pem(key), private=True)
        return pair


def service_account_keys(directory: Path) -> KeyPair:
    """The key pair that signs and verifies service-account tokens (``sa.pub``, ``sa.key``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    _write(pair.cert, pub, private=False)
    _write(pair.key, _key_pem(key), private=True)
    return pair
