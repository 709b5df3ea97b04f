"""A throwaway Keycloak: the server distribution from Maven Central on a free loopback port.

scripts/fetch-keycloak (run by scripts/setup --dev) caches the distribution, already built for an
in-memory H2 database, under ${SUP_CACHE_DIR:-~/.cache/sup}. Each session gets a temp dir that holds
its own copy of bin/ and data/ and links to the cached lib/, conf/, themes/ and providers/ (kc.sh takes
its home from where the script lies), and runs `kc.sh start --optimized` with HTTP on 127.0.0.1:
the database lives in memory and dies with the process, nothing touches the cache. One per session
(about 15 s to start on 2 cores); tests isolate themselves with a fresh realm each.

`Realm` sets one up the way SUP expects, through the admin API (python-keycloak as the master
realm's bootstrap admin): the user profile declaring sshPublicKey/uidNumber/gidNumber/loginShell,
a confidential client whose service account has view-users, query-users, query-groups and
view-events, admin events on, and an audience mapper so its tokens name SUP.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from keycloak import KeycloakAdmin, KeycloakOpenID

from tests.support.ports import free_port
from tests.support.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = REPO / "scripts" / "fetch-keycloak"
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-" + uuid.uuid4().hex[:12]
EXTRA_ATTRIBUTES = ("sshPublicKey", "uidNumber", "gidNumber", "loginShell")


class KeycloakUnavailable(RuntimeError):
    pass


def find_keycloak() -> Path:
    override = os.environ.get("SUP_KEYCLOAK_HOME")
    if override:
        return Path(override)
    if shutil.which("java") is None:
        raise KeycloakUnavailable("java is not installed: apt-get install openjdk-17-jre-headless")
    result = subprocess.run(
        [str(FETCH_SCRIPT), "--cached-only"], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise KeycloakUnavailable(
            "Keycloak is not fetched: run scripts/fetch-keycloak (scripts/setup --dev does)"
        )
    return Path(result.stdout.strip().splitlines()[-1])


class KeycloakServer:
    def __init__(self) -> None:
        self.home = find_keycloak()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = Path(tempfile.mkdtemp(prefix="sup-keycloak-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self, timeout: float = 180) -> KeycloakServer:
        (self._dir / "bin").mkdir()
        for name in ("kc.sh",):
            shutil.copy2(self.home / "bin" / name, self._dir / "bin" / name)
        for name in ("lib", "conf", "themes", "providers"):
            (self._dir / name).symlink_to(self.home / name)
        env = {
            **os.environ,
            "KC_BOOTSTRAP_ADMIN_USERNAME": ADMIN_USER,
            "KC_BOOTSTRAP_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "JAVA_OPTS_KC_HEAP": "-XX:MaxRAMPercentage=25 -XX:InitialRAMPercentage=5",
        }
        command = [
            str(self._dir / "bin" / "kc.sh"), "start", "--optimized",
            "--http-enabled=true", "--hostname-strict=false", "--http-host=127.0.0.1",
            f"--http-port={self.port}", "--http-management-port=0", "--log-level=warn",
        ]  # fmt: skip
        self._log = (self._dir / "keycloak.log").open("wb")
        self._process = subprocess.Popen(
            command,
            cwd=self._dir,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise KeycloakUnavailable(f"Keycloak exited: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/realms/master", timeout=2).status_code == 200:
                    return self
            time.sleep(0.5)
        self.stop()
        raise KeycloakUnavailable(f"Keycloak did not answer within {timeout} s: {self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        path = self._dir / "keycloak.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        stop_process(self._process, timeout=30)
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def admin(self, realm: str = "master") -> KeycloakAdmin:
        """An admin client (the bootstrap admin) working on `realm`."""
        return KeycloakAdmin(
            server_url=self.url,
            username=ADMIN_USER,
            password=ADMIN_PASSWORD,
            realm_name=realm,
            user_realm_name="master",
        )

    def new_realm(self, *, admin_events: bool = True) -> Realm:
        return Realm.create(self, f"r{uuid.uuid4().hex[:10]}", admin_events=admin_events)


@dataclass
class Realm:
    """A realm set up as SUP's docs describe, with its sync client and a public login client."""

    server: KeycloakServer
    name: str
    client_id: str
    client_secret: str
    admin: KeycloakAdmin

    @classmethod
    def create(cls, server: KeycloakServer, name: str, *, admin_events: bool = True) -> Realm:
        admin = server.admin()
        admin.create_realm(
            {
                "realm": name,
                "enabled": True,
                "adminEventsEnabled": admin_events,
                "adminEventsDetailsEnabled": admin_events,
                "accessTokenLifespan": 600,
            }
        )
        admin.change_current_realm(name)
        profile = admin.get_realm_users_profile()
        known = {a["name"] for a in profile["attributes"]}
        for attribute in EXTRA_ATTRIBUTES:
            if attribute not in known:
                profile["attributes"].append(
                    {
                        "name": attribute,
                        "displayName": attribute,
                        "multivalued": attribute == "sshPublicKey",
                        "permissions": {"view": ["admin"], "edit": ["admin"]},
                    }
                )
        admin.update_realm_users_profile(profile)
        client_id = "sup"
        internal = admin.create_client(
            {
                "clientId": client_id,
                "enabled": True,
                "publicClient": False,
                "serviceAccountsEnabled": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
                "protocol": "openid-connect",
            }
        )
        secret = admin.get_client_secrets(internal)["value"]
        account = admin.get_client_service_account_user(internal)
        management = admin.get_client_id("realm-management")
        assert management is not None
        wanted = {"view-users", "query-users", "query-groups", "view-events"}
        roles = [r for r in admin.get_client_roles(management) if r["name"] in wanted]
        admin.assign_client_role(account["id"], management, roles)
        # A public client people log in with (password grant in tests), whose tokens name SUP.
        login = admin.create_client(
            {
                "clientId": "sup-login",
                "enabled": True,
                "publicClient": True,
                "directAccessGrantsEnabled": True,
                "standardFlowEnabled": False,
                "protocol": "openid-connect",
                "protocolMappers": [
                    {
                        "name": "audience-sup",
                        "protocol": "openid-connect",
                        "protocolMapper": "oidc-audience-mapper",
                        "config": {
                            "included.client.audience": client_id,
                            "access.token.claim": "true",
                            "id.token.claim": "false",
                        },
                    }
                ],
            }
        )
        assert login
        return cls(server=server, name=name, client_id=client_id, client_secret=secret, admin=admin)

    @property
    def issuer(self) -> str:
        return f"{self.server.url}/realms/{self.name}"

    def settings(self, **extra: Any) -> dict[str, Any]:
        """SUP's `keycloak` settings for this realm."""
        return {
            "url": self.server.url,
            "realm": self.name,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            **extra,
        }

    def add_user(
        self,
        username: str,
        *,
        email: str | None = None,
        first: str | None = None,
        last: str | None = None,
        enabled: bool = True,
        attributes: dict[str, list[str]] | None = None,
        password: str | None = None,
    ) -> str:
        body: dict[str, Any] = {
            "username": username,
            "enabled": enabled,
            "emailVerified": True,
            "attributes": attributes or {},
        }
        if password and not email:
            email = f"{username.lower()}@example.test"  # a login needs a complete profile
        if email:
            body["email"] = email
        body["firstName"] = first or username.capitalize()
        body["lastName"] = last or "Tester"
        if password:
            body["credentials"] = [{"type": "password", "value": password, "temporary": False}]
        return str(self.admin.create_user(body, exist_ok=False))

    def add_claim(self, attribute: str, claim: str) -> None:
        """Put the user attribute `attribute` in the access tokens of the login client (sup-login)
        as the string claim `claim`, the way an IdP carries its own person id (Okta's `uid`, Entra
        ID's `oid`): declared in the user profile, viewable and editable by administrators only, so
        the person cannot change it."""
        profile = self.admin.get_realm_users_profile()
        if attribute not in {a["name"] for a in profile["attributes"]}:
            profile["attributes"].append(
                {
                    "name": attribute,
                    "displayName": attribute,
                    "permissions": {"view": ["admin"], "edit": ["admin"]},
                }
            )
            self.admin.update_realm_users_profile(profile)
        login = self.admin.get_client_id("sup-login")
        assert login is not None
        self.admin.add_mapper_to_client(
            login,
            {
                "name": f"claim-{claim}",
                "protocol": "openid-connect",
                "protocolMapper": "oidc-usermodel-attribute-mapper",
                "config": {
                    "user.attribute": attribute,
                    "claim.name": claim,
                    "jsonType.label": "String",
                    "access.token.claim": "true",
                    "id.token.claim": "false",
                    "userinfo.token.claim": "false",
                },
            },
        )

    def add_group(self, name: str, parent: str | None = None) -> str:
        return str(self.admin.create_group({"name": name}, parent=parent))

    def add_device_client(self, client_id: str, audience: str = "sup") -> None:
        """A public client with the OAuth device grant (RFC 8628) whose tokens name `audience`, as
        docs/ssh-certificates.md sets one up for `sup ssh login`."""
        self.admin.create_client(
            {
                "clientId": client_id,
                "enabled": True,
                "publicClient": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
                "consentRequired": False,
                "protocol": "openid-connect",
                "attributes": {"oauth2.device.authorization.grant.enabled": "true"},
                "protocolMappers": [
                    {
                        "name": f"audience-{audience}",
                        "protocol": "openid-connect",
                        "protocolMapper": "oidc-audience-mapper",
                        "config": {"included.client.audience": audience, "access.token.claim": "true"},
                    }
                ],
            }
        )

    def approve_device(self, link: str, username: str, password: str) -> str:
        """What a person does in the browser for a device login: open the link, sign in, grant the
        access Keycloak asks for. Returns the last page's text ("Device Login Successful")."""
        browser = _Browser()
        page = browser.go("GET", link)
        for _ in range(4):
            if "Device Login Successful" in page.text or "login-device-login-successful" in page.text:
                return page.text
            form = re.search(r'<form[^>]*action="([^"]+)"', page.text)
            assert form is not None, page.text[-2000:]
            action = urllib.parse.urljoin(str(page.url), html.unescape(form.group(1)))
            fields = dict(
                re.findall(r'<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page.text)
            )
            if 'name="password"' in page.text:
                fields.update(username=username, password=password)
            elif "oauth-grant" in page.text:
                fields["accept"] = "Yes"
            else:
                fields.update(device_user_code=_user_code(link), accept="Yes")
            page = browser.go("POST", action, fields)
        raise AssertionError(f"the device login did not succeed: {page.text[-2000:]}")

    def token(self, username: str, password: str) -> str:
        """An access token for a person, from the sup-login client (password grant)."""
        oidc = KeycloakOpenID(server_url=self.server.url, realm_name=self.name, client_id="sup-login")
        return str(oidc.token(username, password)["access_token"])


def _user_code(link: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).query).get("user_code", [""])[0]


class _Browser:
    """Follows redirects and keeps cookies as a browser does on a loopback origin: it sends the
    cookies Keycloak marks Secure over plain http (http://127.0.0.1 is a secure context to a browser;
    httpx's cookie jar would drop them)."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}

    def go(self, method: str, url: str, form: dict[str, str] | None = None) -> httpx.Response:
        with httpx.Client(follow_redirects=False, timeout=30) as client:
            for _ in range(10):
                cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
                response = client.request(
                    method, url, data=form, headers={"Cookie": cookie} if cookie else {}
                )
                for header in response.headers.get_list("set-cookie"):
                    name, _, value = header.split(";", 1)[0].partition("=")
                    self.cookies[name.strip()] = value.strip()
                if response.status_code not in (301, 302, 303, 307, 308):
                    return response
                url = urllib.parse.urljoin(url, response.headers["location"])
                method, form = "GET", None
        raise AssertionError(f"too many redirects from {url}")
