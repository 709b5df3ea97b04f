"""Pure value rules of the Kubernetes target, shared by the settings and the diff: resource
quantities, retention durations, DNS-1123 names, label keys and values, CIDRs.

Kept free of the Kubernetes client so that validating settings does not import it.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

# A Kubernetes quantity (the API reference's "Quantity"): a decimal number, an optional exponent or
# SI / binary suffix (m, k, M, ..., Ki, Mi, ...).
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]i?|Ki|)$")
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


class InvalidValue(ValueError):
    """A value Kubernetes would refuse; the message says why."""


def parse_quantity(text: str | int | float) -> Decimal:
    """A Kubernetes quantity ("8Gi", "500m", "4", "1e3") as a number, so "4" equals "4000m"."""
    value = str(text).strip()
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise InvalidValue(f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 8Gi, 100G)")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise InvalidValue(f"{value!r} is not a Kubernetes quantity") from None
    if suffix[:1] in ("e", "E"):
        return base * (Decimal(10) ** int(suffix[1:]))
    if suffix not in _SUFFIX:
        raise InvalidValue(f"{value!r} has an unknown suffix {suffix!r}")
    return base * _SUFFIX[suffix]


def positive_quantity(text: str) -> str:
    """A quantity for a manifest, exactly as given: surrounding whitespace would reach the API server."""
    if text != text.strip():
        raise InvalidValue(f"{text!r} has surrounding whitespace")
    if parse_quantity(text) <= 0:
        raise InvalidValue(f"{text!r} must be greater than zero")
    return text


_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
KEEP = "keep"


def parse_retention(text: str) -> datetime.timedelta | None:
    """`keep` -> None (never delete); `30d`, `12h`, `90m`, `0s` -> that duration."""
    if text == KEEP:
        return None
    match = _DURATION.fullmatch(text)
    if not match:
        raise InvalidValue(f"{text!r} must be 'keep' or a duration such as 30d, 12h, 90m or 0s")
    return datetime.timedelta(seconds=int(match.group(1)) * _UNIT[match.group(2)])


DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def dns_label(text: str, what: str = "name") -> str:
    """RFC 1123 label: what namespaces and Service names must be (at most 63 characters)."""
    if len(text) > 63 or not DNS_LABEL.fullmatch(text):
        raise InvalidValue(
            f"{what} {text!r} must be at most 63 lower-case letters, digits or '-', "
            "starting and ending with a letter or digit"
        )
    return text


def dns_subdomain(text: str, what: str = "name") -> str:
    """RFC 1123 subdomain: what ConfigMap and Secret names must be (at most 253 characters)."""
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise InvalidValue(
            f"{what} {text!r} must be at most 253 lower-case letters, digits, '-' or '.', "
            "starting and ending with a letter or digit"
        )
    return text


def port_range(text: str) -> tuple[int, int]:
    """`60001-63000` -> (60001, 63000): unprivileged ports (srun listens as the user), low <= high."""
    low, dash, high = text.partition("-")
    if not dash or not low.isdigit() or not high.isdigit():
        raise InvalidValue(f"{text!r} must be a port range such as 60001-63000")
    first, last = int(low), int(high)
    if not 1024 <= first <= last <= 65535:
        raise InvalidValue(
            f"port range {text!r} must lie within 1024-65535, its first port not above its last"
        )
    return first, last


def label_key(text: str) -> str:
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        raise InvalidValue(f"label key {text!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise InvalidValue(
            f"label key {text!r}: the name must be at most 63 letters, digits, '-', '_' or '.'"
        )
    return text


def label_value(text: str) -> str:
    if len(text) > 63 or not _LABEL_VALUE.fullmatch(text):
        raise InvalidValue(
            f"label value {text!r} must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return text


def cidr(text: str) -> str:
    """A CIDR in the canonical form NetworkPolicy expects (host bits zero)."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise InvalidValue(f"{text!r} is not a CIDR such as 10.0.0.0/8 or 192.0.2.10/32: {exc}") from None
    return str(network)


def inside(blocked: str, allowed: str) -> bool:
    """Is network `blocked` a strict part of `allowed` (so it can be an `except` of it)?"""
    b, a = ipaddress.ip_network(blocked), ipaddress.ip_network(allowed)
    return b.version == a.version and b != a and b.subnet_of(a)  # type: ignore[arg-type]


def overlaps(one: str, other: str) -> bool:
    a, b = ipaddress.ip_network(one), ipaddress.ip_network(other)
    return a.version == b.version and a.overlaps(b)


def reached_through(address: str, allowed: Iterable[str], carved: Iterable[str]) -> str | None:
    """The first of the `allowed` networks through which `address` (an IP, or a host name: None) is
    reachable, i.e. inside it and inside none of the `carved` networks; None when there is none."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return None
    if any(ip in ipaddress.ip_network(network) for network in carved):
        return None
    return next((network for network in allowed if ip in ipaddress.ip_network(network)), None)
