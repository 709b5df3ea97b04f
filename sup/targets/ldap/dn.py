"""Distinguished names (RFC 4514): building them from untrusted values, parsing and comparing them.

Every value SUP puts into a DN goes through `escape_value`, so a name such as `kim,ou=admins` or
`*)(uid=*` stays one attribute value of one RDN and can never address another entry. SUP puts no
value into a search filter: every filter it sends is a constant (see observe.py).

DNs are compared in a normalized form: attribute types and values lower-cased (every naming
attribute SUP meets, uid, cn, ou and dc, matches case-insensitively), escapes decoded and re-encoded
one way, insignificant spaces dropped. ldap3's own helpers are not used here: `escape_rdn` turns NUL
into a backslash and a raw NUL instead of `\\00`, and `parse_dn` neither unescapes values nor accepts
spaces around `=`.
"""

from __future__ import annotations

import re

# Characters that must be escaped anywhere in a value (RFC 4514 section 2.4), plus `=`, which need
# not be but reads less ambiguously escaped.
_SPECIAL = frozenset('"+,;<>\\=')
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9._@-]+")
# A DN of such plain RDNs is already in normal form once lower-cased.
_PLAIN_RDN = r"[A-Za-z][A-Za-z0-9-]*=[A-Za-z0-9._@-]+"
_PLAIN_DN = re.compile(rf"{_PLAIN_RDN}(?:,{_PLAIN_RDN})*")
_ATTRIBUTE_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9-]*|[0-9]+(?:\.[0-9]+)*")
_HEX = frozenset("0123456789abcdefABCDEF")

Rdn = tuple[tuple[str, str], ...]


class InvalidDn(ValueError):
    """A string that is not a distinguished name; the message says where it goes wrong."""


def escape_value(value: str) -> str:
    """Escape an attribute value for use in an RDN (RFC 4514 section 2.4)."""
    if _PLAIN_VALUE.fullmatch(value):
        return value  # nothing to escape: every POSIX name SUP writes
    out: list[str] = []
    last = len(value) - 1
    for i, char in enumerate(value):
        if char in _SPECIAL:
            out.append("\\" + char)
        elif char == "\x00" or ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\{ord(char):02x}")
        elif (char == " " and (i == 0 or i == last)) or (char == "#" and i == 0):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def child_dn(attribute: str, value: str, parent: str) -> str:
    """The DN of the entry named `attribute=value` directly below `parent`."""
    if not _ATTRIBUTE_TYPE.fullmatch(attribute):
        raise InvalidDn(f"{attribute!r} is not an attribute type")
    return f"{attribute}={escape_value(value)},{parent}"


def parse_dn(dn: str) -> list[Rdn]:
    """The RDNs of `dn`, each a tuple of (lower-case attribute type, unescaped value) pairs."""
    rdns: list[Rdn] = []
    if not dn.strip():
        return rdns
    avas: list[tuple[str, str]] = []
    i, n = 0, len(dn)
    while True:
        equals = dn.find("=", i)
        if equals < 0:
            raise InvalidDn(f"{dn!r}: {dn[i:]!r} has no '='")
        attribute = dn[i:equals].strip()
        if not _ATTRIBUTE_TYPE.fullmatch(attribute):
            raise InvalidDn(f"{dn!r}: {attribute!r} is not an attribute type")
        value, i = _parse_value(dn, equals + 1)
        avas.append((attribute.lower(), value))
        if i >= n:
            rdns.append(tuple(avas))
            return rdns
        separator = dn[i]
        i += 1
        if separator != "+":
            rdns.append(tuple(avas))
            avas = []
        if i >= n:
            raise InvalidDn(f"{dn!r} ends with a separator")


def _parse_value(dn: str, i: int) -> tuple[str, int]:
    """One attribute value starting at `dn[i]`: (the unescaped value, the index after it)."""
    n = len(dn)
    while i < n and dn[i] == " ":
        i += 1
    raw = bytearray()
    trailing_spaces = 0
    while i < n:
        char = dn[i]
        if char == "\\":
            if i + 1 >= n:
                raise InvalidDn(f"{dn!r} ends with an unfinished escape")
            if dn[i + 1] in _HEX and i + 2 < n and dn[i + 2] in _HEX:
                raw.append(int(dn[i + 1 : i + 3], 16))
                i += 3
            else:
                raw += dn[i + 1].encode()
                i += 2
            trailing_spaces = 0
            continue
        if char in ",;+":
            break
        if char in '"<>':
            raise InvalidDn(f"{dn!r}: {char!r} must be escaped in a value")
        raw += char.encode()
        trailing_spaces = trailing_spaces + 1 if char == " " else 0
        i += 1
    if trailing_spaces:
        del raw[-trailing_spaces:]
    try:
        return raw.decode(), i
    except UnicodeDecodeError as exc:
        raise InvalidDn(f"{dn!r}: a value is not UTF-8") from exc


def normalize(dn: str) -> str:
    """A canonical form of `dn` for comparisons (not for writing: values are lower-cased)."""
    if _PLAIN_DN.fullmatch(dn):
        return dn.lower()  # the common case, and the hot path of a 20,000-entry observe
    return ",".join(
        "+".join(sorted(f"{t}={escape_value(v.lower())}" for t, v in rdn)) for rdn in parse_dn(dn)
    )


def is_under(dn: str, parent: str) -> bool:
    """Whether normalized `dn` lies strictly below normalized `parent`."""
    return dn.endswith("," + parent) and len(dn) > len(parent) + 1


def is_within(dn: str, parent: str) -> bool:
    """Whether normalized `dn` is `parent` or lies below it."""
    return dn == parent or is_under(dn, parent)


def parent_of(dn: str) -> str:
    """The parent of `dn` (any form); the empty string for a one-RDN DN."""
    rdns = parse_dn(dn)
    return ",".join("+".join(f"{t}={escape_value(v)}" for t, v in rdn) for rdn in rdns[1:])


def first_rdn(dn: str) -> Rdn:
    """The first RDN of `dn`: ((type, value), ...)."""
    rdns = parse_dn(dn)
    if not rdns:
        raise InvalidDn("the empty DN has no RDN")
    return rdns[0]


def depth(dn: str) -> int:
    """How many RDNs `dn` has."""
    return len(parse_dn(dn))
