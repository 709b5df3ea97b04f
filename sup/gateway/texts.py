"""What a person sees from the gateway (OpenSSH prints each of these on their terminal)."""

from __future__ import annotations

BUSY = "gateway busy, try again in a minute"
TOO_MANY_KEYS = "too many authentication failures"
WAKE_BANNER = "Starting your login pod, this takes about 10 s\r\n"


def help_text(username: str, public_host: str | None) -> str:
    """The answer to a session channel (`ssh user@gateway` without -J): how to go through instead."""
    host = public_host or "THIS-GATEWAY"
    return (
        "This SSH gateway gives no shell: it leads to your login pod. Connect through it:\r\n"
        f"    ssh -J {username}@{host} {username}@login\r\n"
        "or put this in ~/.ssh/config and use `ssh cluster`, `scp f cluster:`, `sftp cluster`:\r\n"
        "    Host cluster\r\n"
        "        HostName login\r\n"
        f"        User {username}\r\n"
        f"        ProxyJump {username}@{host}\r\n"
    )


def printable(name: str, limit: int = 64) -> str:
    """A name the client sent, safe to echo back and to log: printable ASCII, bounded."""
    cleaned = "".join(c if 32 < ord(c) < 127 else "?" for c in name[:limit])
    return cleaned + ("..." if len(name) > limit else "")


def no_such_pod(name: str) -> str:
    return f"no login pod named {printable(name)}"


def did_not_start(timeout: float) -> str:
    return f"your login pod did not start within {timeout:g} s; try again in a minute"


def cannot_wake() -> str:
    return "your login pod could not be started; try again in a minute"


def too_many_sessions(limit: int) -> str:
    return f"you already hold {limit} sessions through the gateway; close one and try again"


def access_removed(pod: str) -> str:
    return (
        f"your access to the login pod {printable(pod)} was removed; "
        "its session through the gateway is closed"
    )
