#!/usr/bin/env python3
"""sup-ssh-login: log in to a SUP cluster with your identity provider; no key to upload.

    python3 sup-ssh-login https://sup.example.org        # or: sup ssh login https://sup.example.org

1. asks SUP (GET /api/v1/ssh-ca) which identity provider, client and gateway the cluster uses;
2. signs you in there with the OAuth device authorization grant (RFC 8628): it prints a code and a
   link (and opens your browser when it can); you approve in the browser;
3. makes an ed25519 key if you have none at --key (default ~/.ssh/id_ed25519; private 0600);
4. has SUP sign that key as a short-lived OpenSSH certificate for your username, saved beside it
   (KEY-cert.pub);
5. writes a block for the cluster into your ssh config (between `# BEGIN sup HOST` and `# END sup
   HOST`, replaced on every run, nothing else of the file touched), so that `ssh HOST` works.

Run it again when the certificate expires (SUP says when). One file, Python 3.9+ and OpenSSH's
ssh-keygen, nothing else: researchers download it from their SUP (GET /api/v1/ssh-ca/client).
This module imports nothing but the standard library (a test holds it to that).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
HOST_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
GATEWAY = re.compile(
    r"^(?:(?P<name>[A-Za-z0-9][A-Za-z0-9.-]*)|\[(?P<v6>[0-9A-Fa-f:.]+)\])(?::(?P<port>[0-9]{1,5}))?$"
)
"""What SUP may name as its gateway: a host name, an IPv4 address or a bracketed IPv6 address, and
an optional port. Anything else would be written into the ssh config as more than a name."""
USERNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


class LoginFailed(Exception):
    """What went wrong, in words for the person at the keyboard (never a token)."""


def _request(
    url: str, data: dict[str, str] | None = None, token: str | None = None, body: dict[str, Any] | None = None
) -> Any:
    """GET (or POST a form or a JSON body) and decode the JSON answer; HTTP errors come back as
    (status, answer) through LoginFailed's message only when they are not OAuth's own."""
    headers = {"Accept": "application/json"}
    payload = None
    if data is not None:
        payload = urllib.parse.urlencode(data).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=payload, headers=headers)  # noqa: S310 - the user's own URLs
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read() or b"null")


def _error_body(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        found = json.loads(exc.read() or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def discover(sup_url: str) -> dict[str, Any]:
    """SUP's CA answer, with its `login` part (issuer, client_id, gateway_host)."""
    url = sup_url.rstrip("/") + "/api/v1/ssh-ca"
    try:
        answer = _request(url)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise LoginFailed(f"{sup_url} issues no SSH certificates (ask your platform team)") from None
        raise LoginFailed(f"{url} answered {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise LoginFailed(f"cannot reach SUP at {sup_url}: {exc}") from None
    login = answer.get("login") if isinstance(answer, dict) else None
    if not isinstance(login, dict) or not login.get("issuer") or not login.get("client_id"):
        raise LoginFailed(
            f"{sup_url} does not offer logins with the identity provider (ssh_ca.login_client_id)"
        )
    return dict(answer)


def device_login(
    issuer: str,
    client_id: str,
    out: TextIO,
    *,
    open_browser: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """An access token from the issuer's device authorization grant (RFC 8628)."""
    try:
        metadata = _request(issuer.rstrip("/") + "/.well-known/openid-configuration")
        device_endpoint = metadata["device_authorization_endpoint"]
        token_endpoint = metadata["token_endpoint"]
        started = _request(device_endpoint, data={"client_id": client_id, "scope": "openid"})
    except urllib.error.HTTPError as exc:
        reason = _error_body(exc).get("error", exc.code)
        raise LoginFailed(f"the identity provider refused to start a device login: {reason}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoginFailed(f"cannot start a device login at {issuer}: {exc}") from None
    link = started.get("verification_uri_complete") or started["verification_uri"]
    out.write(f"To sign in, open {link}\nand check that it shows the code {started['user_code']}.\n")
    out.flush()
    if open_browser:
        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(link)
    interval = float(started.get("interval", 5))
    deadline = time.monotonic() + float(started.get("expires_in", 600))
    form = {"grant_type": DEVICE_GRANT, "device_code": started["device_code"], "client_id": client_id}
    while time.monotonic() < deadline:
        sleep(interval)
        try:
            return str(_request(token_endpoint, data=form)["access_token"])
        except urllib.error.HTTPError as exc:
            error = _error_body(exc).get("error")
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += 5  # RFC 8628 §3.5
                continue
            if error == "access_denied":
                raise LoginFailed("the sign-in was denied in the browser") from None
            if error == "expired_token":
                break
            raise LoginFailed(
                f"the identity provider refused the device login: {error or exc.code}"
            ) from None
        except (OSError, ValueError, KeyError) as exc:
            raise LoginFailed(f"cannot reach the identity provider: {exc}") from None
    raise LoginFailed("the code expired before it was approved; run me again")


def ensure_key(key: Path, out: TextIO) -> str:
    """The public key line of `key`, made (ed25519, no passphrase, 0600) when there is none."""
    public = Path(f"{key}.pub")
    if not key.exists():
        key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        comment = f"{os.environ.get('USER', 'me')}@sup-ssh-login"
        try:
            # ssh-keygen from the person's PATH, as ssh itself is
            command = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)]
            subprocess.run(command, check=True, capture_output=True)  # noqa: S603
        except (OSError, subprocess.CalledProcessError) as exc:
            raise LoginFailed(f"cannot make a key with ssh-keygen (is OpenSSH installed?): {exc}") from None
        key.chmod(0o600)
        out.write(f"made a new key: {key}\n")
    if not public.exists():
        raise LoginFailed(f"{public} is missing: `ssh-keygen -y -f {key} > {public}` makes it again")
    return public.read_text().strip()


def request_certificate(sup_url: str, token: str, public_key: str) -> dict[str, Any]:
    url = sup_url.rstrip("/") + "/api/v1/me/ssh-certificate"
    try:
        answer = _request(url, token=token, body={"public_key": public_key})
    except urllib.error.HTTPError as exc:
        detail = _error_body(exc).get("detail", "")
        if not isinstance(detail, str):
            detail = json.dumps(detail)
        raise LoginFailed(f"SUP refused the certificate ({exc.code}): {detail}") from None
    except (OSError, ValueError) as exc:
        raise LoginFailed(f"cannot reach SUP: {exc}") from None
    return dict(answer)


def gateway_address(gateway: str) -> tuple[str, int | None]:
    """SUP's `gateway.public_host` as (host, port): `login.example.org`, `login.example.org:2222`,
    `[2001:db8::1]:2222`. Refused when it is not plainly that (it goes into the ssh config)."""
    found = GATEWAY.match(gateway)
    port = int(found["port"]) if found and found["port"] else None
    if found is None or (port is not None and not 0 < port < 65536):
        raise LoginFailed(f"SUP names a gateway that is not a host[:port]: {gateway[:80]!r}")
    return found["name"] or found["v6"], port


def config_block(alias: str, username: str, gateway: str, key: Path, certificate: Path) -> str:
    """The ssh config block: `ssh ALIAS` is a shell in your login pod, through the gateway.

    The gateway has its own entry (ALIAS-gateway) with the same key and certificate: ssh jumps with
    a second ssh that reads this config, and without the entry it would offer only the default keys
    (so a --key elsewhere would fail at the gateway)."""
    host, port = gateway_address(gateway)
    if not USERNAME.match(username):
        raise LoginFailed(f"SUP signed a principal that is not a username: {username[:80]!r}")
    identity = (
        f"    User {username}\n"
        f"    IdentityFile {key}\n"
        f"    CertificateFile {certificate}\n"
        "    IdentitiesOnly yes\n"
    )
    return (
        f"# BEGIN sup {alias} (written by sup-ssh-login; replaced when it runs again)\n"
        f"Host {alias}\n"
        "    HostName login\n"
        f"    ProxyJump {alias}-gateway\n"
        f"    HostKeyAlias {alias}-login\n"
        f"{identity}"
        f"Host {alias}-gateway\n"
        f"    HostName {host}\n" + (f"    Port {port}\n" if port is not None else "") + f"{identity}"
        f"# END sup {alias}\n"
    )


def write_config(path: Path, alias: str, block: str) -> None:
    """Put `block` into the ssh config at `path`: in place of the previous block for `alias`, else
    at the end. Nothing else of the file changes; the file is replaced atomically, mode kept (0600
    when new)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    pattern = re.compile(rf"^# BEGIN sup {re.escape(alias)} .*?^# END sup {re.escape(alias)}\n", re.M | re.S)
    if pattern.search(old):
        new = pattern.sub(lambda _: block, old, count=1)
    else:
        new = old + ("" if not old or old.endswith("\n") else "\n") + ("\n" if old else "") + block
    temporary = path.with_name(f".{path.name}.sup-ssh-login")
    temporary.write_text(new)
    temporary.chmod(mode)
    os.replace(temporary, path)


def login(
    sup_url: str,
    *,
    key: Path,
    alias: str,
    ssh_config: Path,
    out: TextIO,
    open_browser: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The whole login; returns SUP's certificate answer."""
    if not HOST_ALIAS.match(alias):
        raise LoginFailed(f"--host {alias!r}: letters, digits, '.', '_' and '-' only")
    ca = discover(sup_url)
    gateway = ca["login"].get("gateway_host")
    if not gateway:
        raise LoginFailed(f"{sup_url} names no SSH gateway (gateway.public_host)")
    gateway_address(str(gateway))  # refused before the person signs in, not after
    token = device_login(
        ca["login"]["issuer"], ca["login"]["client_id"], out, open_browser=open_browser, sleep=sleep
    )
    public_key = ensure_key(key, out)
    made = request_certificate(sup_url, token, public_key)
    certificate = Path(f"{key}-cert.pub")
    certificate.write_text(str(made["certificate"]) + "\n")
    certificate.chmod(0o644)
    write_config(
        ssh_config, alias, config_block(alias, str(made["principal"]), str(gateway), key, certificate)
    )
    out.write(
        f"signed in as {made['principal']}; certificate valid until {made['valid_before']}\n"
        f"next: ssh {alias}\n"
    )
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sup-ssh-login", description=__doc__.split("\n\n")[0])
    parser.add_argument("sup_url", help="your cluster's SUP, e.g. https://sup.example.org")
    parser.add_argument(
        "--key",
        type=Path,
        default=Path.home() / ".ssh" / "id_ed25519",
        help="your private key (made when missing); default ~/.ssh/id_ed25519",
    )
    parser.add_argument("--host", default="cluster", help="the name you will ssh to (default: cluster)")
    parser.add_argument(
        "--ssh-config",
        type=Path,
        default=Path.home() / ".ssh" / "config",
        help="the ssh config file to write the block into",
    )
    parser.add_argument("--no-browser", action="store_true", help="only print the link")
    args = parser.parse_args(argv)
    try:
        login(
            args.sup_url,
            key=args.key.expanduser(),
            alias=args.host,
            ssh_config=args.ssh_config.expanduser(),
            out=sys.stdout,
            open_browser=not args.no_browser,
        )
    except LoginFailed as exc:
        sys.stderr.write(f"sup-ssh-login: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
