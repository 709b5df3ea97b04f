"""The tests' one certificate authority, made with `cryptography` (no openssl on the machine needed).

Every test server that speaks TLS gets its certificates here: the throwaway kube-apiserver (its
server, admin and component client certificates: tests/support/kubeapi.py, kubenode.py), slapd's
ldaps:// and StartTLS (tests/support/slapd.py), and the stand-in SUP behind TLS in the gateway tests.
Keys are P-256; certificates are valid from five minutes ago for three days."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def pem_key(key: Any) -> bytes:
    """A private key as unencrypted PKCS#8 PEM."""
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def common_name(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def client_subject(user: str, *groups: str) -> x509.Name:
    """The subject of a client certificate: kube-apiserver reads CN as the user, O as groups."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, user)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=3)
    )


class TestCa:
    """A self-signed CA that signs servers' and clients' certificates."""

    __test__ = False  # not a pytest test class

    def __init__(self, name: str = "SUP test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = common_name(name)
        builder = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
        )
        self.cert = _validity(builder).sign(self.key, hashes.SHA256())

    @property
    def pem(self) -> bytes:
        return pem_cert(self.cert)

    def issue(
        self,
        subject: x509.Name,
        *,
        server: bool,
        ips: tuple[str, ...] = ("127.0.0.1",),
        dns: tuple[str, ...] = ("localhost",),
    ) -> tuple[bytes, bytes]:
        """A certificate and its key, both PEM: a server's (for the IP addresses and DNS names
        given) or a client's (the subject's CN is the user, each O a group)."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _validity(
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
        )
        if server:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            names += [x509.DNSName(name) for name in dns]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False).add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        return pem_cert(builder.sign(self.key, hashes.SHA256())), pem_key(key)


def write_server_tls(
    directory: Path, host: str = "127.0.0.1", *, name: str = "server"
) -> tuple[Path, Path, Path]:
    """A new CA and a certificate for `host` (and localhost) signed by it, written to `directory`:
    (ca.pem, NAME.pem, NAME.key), the key readable by its owner only."""
    ca = TestCa()
    cert, key = ca.issue(common_name(host), server=True, ips=(host,))
    ca_file, cert_file, key_file = directory / "ca.pem", directory / f"{name}.pem", directory / f"{name}.key"
    ca_file.write_bytes(ca.pem)
    cert_file.write_bytes(cert)
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    return ca_file, cert_file, key_file
