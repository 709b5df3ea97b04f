"""POSIX user and group names.

The rule is the portable subset that useradd, sssd, Slurm and Kubernetes labels all accept:
lower-case ASCII, starting with a letter or underscore, then letters, digits, underscore or hyphen,
at most 32 characters. It excludes by construction every character that is special in an LDAP DN
or filter (`, = + < > # ; \\ " * ( )` and NUL), in a passwd line (`:`) and in a shell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Anchored for JSON schema and hypothesis; Python code must use it with fullmatch: `re.match` and `$`
# would also accept the name followed by a newline (`root\n` is not `root`, and not a POSIX name).
NAME_PATTERN = r"^[a-z_][a-z0-9_-]*$"
_NAME_RE = re.compile(NAME_PATTERN)
MAX_NAME_LENGTH = 32

# Accounts that exist on every node, belong to the system or to the daemons SUP's cluster runs on.
# Provisioning a person under one of these names would hand them that identity.
RESERVED_USERNAMES: frozenset[str] = frozenset(
    {
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
        "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "messagebus",
        "systemd-network", "systemd-resolve", "systemd-timesync", "systemd-coredump", "polkitd",
        "sshd", "slurm", "munge", "mysql", "postgres", "openldap", "ldap", "sssd", "nslcd", "nscd",
        "admin", "administrator", "operator", "adm", "halt", "shutdown", "ftp", "dnsmasq", "ntp",
        "chrony", "_chrony", "avahi", "statd", "rpc", "rpcuser", "nfsnobody", "tss", "uuidd", "tcpdump",
        "kubelet", "etcd", "docker", "containerd", "sup",
    }
)  # fmt: skip

# Groups with system meaning: membership in most of them grants privileges on a node.
RESERVED_GROUPNAMES: frozenset[str] = RESERVED_USERNAMES | frozenset(
    {
        "wheel", "sudo", "tty", "disk", "kmem", "dialout", "cdrom", "floppy", "audio", "video",
        "plugdev", "staff", "users", "shadow", "utmp", "input", "render", "kvm", "netdev", "lpadmin",
        "sasl", "src", "voice", "fax", "tape", "crontab", "ssl-cert", "systemd-journal",
    }
)  # fmt: skip


class InvalidName(ValueError):
    """A name that cannot be a POSIX user or group name; the message says why."""


def check_name(name: str, *, kind: str = "name", reserved: Iterable[str] = ()) -> str:
    """Return `name` if it is a valid, non-reserved POSIX name, else raise InvalidName."""
    if not isinstance(name, str):
        raise InvalidName(f"{kind} must be a string")
    if name == "":
        raise InvalidName(f"{kind} must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{kind} is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed")
    if not _NAME_RE.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[a-z0-9_-]", c)})
        if name[0].isdigit() or name[0] == "-":
            why = "must start with a lower-case letter or underscore"
        elif bad:
            shown = ", ".join(repr(c) for c in bad[:5])
            why = f"contains characters that are not allowed ({shown})"
        else:  # pragma: no cover - the regex and the two checks above cover every case
            why = "is not a valid POSIX name"
        raise InvalidName(f"{kind} {name!r} {why}; use lower-case letters, digits, '_' and '-'")
    if name in reserved:
        raise InvalidName(f"{kind} {name!r} is reserved for the system")
    return name


def check_username(name: str, extra_reserved: Iterable[str] = ()) -> str:
    return check_name(name, kind="username", reserved=RESERVED_USERNAMES | frozenset(extra_reserved))


def check_groupname(name: str, extra_reserved: Iterable[str] = ()) -> str:
    return check_name(name, kind="group name", reserved=RESERVED_GROUPNAMES | frozenset(extra_reserved))
