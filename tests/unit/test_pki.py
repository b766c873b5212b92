"""CertificateAuthority and service-account keys: signatures, SANs, organizations, usages and key file modes."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conformance.cluster.pki import CertificateAuthority, KeyPair, service_account_keys


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ca_certificate_is_a_self_signed_ca(ca: CertificateAuthority) -> None:
    cert = _cert(ca.pair.cert)
    assert ca.pair == KeyPair(ca.directory / "ca.crt", ca.directory / "ca.key")
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kthena-conformance-ca"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    cert.verify_directly_issued_by(cert)
    assert ca.cert_pem == ca.pair.cert.read_bytes()


def test_ca_key_matches_its_certificate_and_is_private(ca: CertificateAuthority) -> None:
    key = serialization.load_pem_private_key(ca.pair.key.read_bytes(), password=None)
    assert key.public_key() == _cert(ca.pair.cert).public_key()
    assert _mode(ca.pair.key) == 0o600


ISSUED = [
    pytest.param(
        {
            "name": "apiserver",
            "common_name": "kube-apiserver",
            "hosts": ("127.0.0.1", "localhost", "10.96.0.1"),
            "server": True,
        },
        id="apiserver",
    ),
    pytest.param(
        {"name": "admin", "common_name": "kthena-admin", "organization": "system:masters", "client": True}, id="admin"
    ),
    pytest.param({"name": "kcm", "common_name": "system:kube-controller-manager", "client": True}, id="component"),
    pytest.param(
        {
            "name": "webhook",
            "common_name": "webhook",
            "hosts": ("::1", "host.docker.internal"),
            "client": True,
            "server": True,
        },
        id="both-usages",
    ),
]


@pytest.mark.parametrize("request_", ISSUED)
def test_issued_certificate_verifies_against_the_ca(ca: CertificateAuthority, request_: dict[str, object]) -> None:
    pair = ca.issue(**request_)  # type: ignore[arg-type]
    cert = _cert(pair.cert)
    ca_cert = _cert(ca.pair.cert)
    cert.verify_directly_issued_by(ca_cert)  # issuer name and signature
    assert cert.issuer == ca_cert.subject
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    assert aki == ski
    assert cert.not_valid_before_utc < cert.not_valid_after_utc <= ca_cert.not_valid_after_utc
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == request_["common_name"]


@pytest.mark.parametrize("request_", ISSUED)
def test_issued_key_matches_and_files_are_named_and_private(
    ca: CertificateAuthority, request_: dict[str, object]
) -> None:
    pair = ca.issue(**request_)  # type: ignore[arg-type]
    assert pair == KeyPair(ca.directory / f"{request_['name']}.crt", ca.directory / f"{request_['name']}.key")
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.public_key() == _cert(pair.cert).public_key()
    assert _mode(pair.key) == 0o600


def test_sans_include_ips_and_dns_names(ca: CertificateAuthority) -> None:
    hosts = ("127.0.0.1", "::1", "10.96.0.1", "localhost", "kubernetes.default.svc")
    cert = _cert(ca.issue("sans", common_name="x", hosts=hosts, server=True).cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.96.0.1"),
    }
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "kubernetes.default.svc"}


def test_no_hosts_means_no_san_extension(ca: CertificateAuthority) -> None:
    cert = _cert(ca.issue("nosan", common_name="x", client=True).cert)
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


@pytest.mark.parametrize(
    ("organization", "expected"),
    [pytest.param("system:masters", ["system:masters"], id="masters"), pytest.param(None, [], id="none")],
)
def test_client_organization(ca: CertificateAuthority, organization: str | None, expected: list[str]) -> None:
    cert = _cert(ca.issue("org", common_name="u", organization=organization, client=True).cert)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == expected


@pytest.mark.parametrize(
    ("client", "server", "usages"),
    [
        pytest.param(True, False, {ExtendedKeyUsageOID.CLIENT_AUTH}, id="client"),
        pytest.param(False, True, {ExtendedKeyUsageOID.SERVER_AUTH}, id="server"),
        pytest.param(True, True, {ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH}, id="both"),
    ],
)
def test_extended_key_usage(
    ca: CertificateAuthority, client: bool, server: bool, usages: set[x509.ObjectIdentifier]
) -> None:
    cert = _cert(ca.issue("eku", common_name="x", client=client, server=server).cert)
    assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == usages


def test_issue_with_default_usages_produces_a_parseable_certificate(ca: CertificateAuthority) -> None:
    cert = _cert(ca.issue("plain", common_name="x").cert)
    try:
        usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return  # no EKU at all would be fine too
    assert usages


def test_certificates_from_two_cas_do_not_cross_verify(tmp_path: Path, ca: CertificateAuthority) -> None:
    other = CertificateAuthority(tmp_path / "other")
    cert = _cert(other.issue("x", common_name="x", client=True).cert)
    # Same CA common name, so only the signature tells them apart.
    assert cert.issuer == _cert(ca.pair.cert).subject
    with pytest.raises(InvalidSignature):
        cert.verify_directly_issued_by(_cert(ca.pair.cert))


def test_reissuing_overwrites_and_keeps_the_key_private(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path / "pki")
    first = authority.issue("svc", common_name="a", client=True)
    first.key.chmod(0o644)
    second = authority.issue("svc", common_name="b", client=True)
    assert second == first
    assert _cert(second.cert).subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "b"
    assert _mode(second.key) == 0o600


def test_ca_creates_its_directory(tmp_path: Path) -> None:
    authority = CertificateAuthority(tmp_path / "a" / "b" / "pki", common_name="my-ca")
    assert authority.pair.cert.is_file()
    subject = _cert(authority.pair.cert).subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "my-ca"


def test_service_account_keys(tmp_path: Path) -> None:
    pair = service_account_keys(tmp_path)
    assert pair == KeyPair(tmp_path / "sa.pub", tmp_path / "sa.key")
    public = serialization.load_pem_public_key(pair.cert.read_bytes())
    private = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key() == public
    assert _mode(pair.key) == 0o600
    assert b"PRIVATE KEY" not in pair.cert.read_bytes()
    # The pair really signs and verifies (what the apiserver does with service-account tokens).
    signature = private.sign(b"token", ec.ECDSA(hashes.SHA256()))
    public.verify(signature, b"token", ec.ECDSA(hashes.SHA256()))  # type: ignore[union-attr, call-arg, arg-type]


def test_service_account_keys_differ_per_call(tmp_path: Path) -> None:
    first = service_account_keys(tmp_path).key.read_bytes()
    second = service_account_keys(tmp_path).key.read_bytes()
    assert first != second
