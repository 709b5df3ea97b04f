"""No secret in logs, errors or API output (issue 10): a real `sup serve` at debug level, used with
every kind of secret SUP meets, and then its whole log and every answer it gave grepped for them.

Secrets used: the admin, operator and SCIM bearer tokens; a wrong but well-formed token; the LDAP bind
password (SUP binds with it on every pass); a SCIM OAuth connection's introspection client secret
and an access token pushed on it; the Kubernetes client key SUP's kubeconfig names; an SSH
*private* key pasted where a public key belongs (API and SCIM); a SCIM `password` attribute; and a
token created through the API, whose secret may appear in exactly one place: the answer that
created it.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from tests.e2e.stack import Stack, wait_until
from tests.support import keys
from tests.support.ports import free_port
from tests.support.server import SupServer

API = "/api/v1"
SCIM_JSON = "application/scim+json"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"


def _private_key() -> str:
    return (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        .decode()
    )


def _key_material(pem: str) -> list[str]:
    """The base64 lines of a PEM block: what must not show up anywhere, whole or in part."""
    return [line for line in pem.splitlines() if line and not line.startswith("-----") and len(line) >= 20]


@pytest.mark.timeout(300)
def test_no_secret_in_logs_errors_or_api_output(stack: Stack) -> None:
    stack.config["log"] = {"format": "json"}
    # A SCIM connection checked by introspection at an endpoint that is not there: its client secret
    # is sent nowhere, and the access token an IdP pushes with is refused (503) without being echoed.
    oauth_secret = secrets.token_urlsafe(24)
    introspection = f"http://127.0.0.1:{free_port()}/introspect"
    stack.config["scim"] = {
        "oauth": {
            "idp": {
                "issuer": "http://127.0.0.1/realms/none",
                "introspection_url": introspection,
                "client_id": "sup",
                "client_secret": oauth_secret,
                "allow_insecure_http": True,
            }
        }
    }
    # At debug level: the most a misconfigured production could log.
    server = SupServer(stack.env(), stack.directory / "debug.log", log_level="debug")
    stack.servers.append(server)

    admin, operator, scim = stack.token("admin"), stack.token("operator"), stack.token("scim")
    scim = {**scim, "Content-Type": SCIM_JSON}
    wrong = f"sup_{secrets.token_urlsafe(32)}"
    private_key = _private_key()
    scim_password = f"Pw-{secrets.token_urlsafe(24)}"
    bind_password = stack.config["ldap"]["bind_password"]
    kube_key = stack.kubeapi.admin_key.read_text()
    answers: list[str] = []

    def call(method: str, path: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
        response = httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kwargs)
        answers.append(f"{response.status_code} {dict(response.headers)} {response.text}")
        return response

    # Ordinary work, provisioned to every target (the LDAP bind password is used on each pass).
    assert call("POST", f"{API}/groups", admin, json={"name": "physics"}).status_code == 201
    account = {"name": "phys", "group": "physics"}
    assert call("POST", f"{API}/slurm/accounts", admin, json=account).status_code == 201
    kim = {"username": "kim", "groups": ["physics"], "ssh_public_keys": [keys.ed25519_key("kim@laptop")]}
    assert call("POST", f"{API}/users", operator, json=kim).status_code == 201
    wait_until(lambda: stack.in_kube("kim") and ("phys", "kim") in stack.associations(), what="kim")

    # Secrets where they do not belong: each refused, none echoed.
    assert call("GET", f"{API}/users", {"Authorization": f"Bearer {wrong}"}).status_code == 401
    assert call("POST", f"{API}/users", {"Authorization": f"Bearer {wrong}"}, json=kim).status_code == 401
    assert call("GET", f"{API}/users", {"Authorization": f"Basic {wrong}"}).status_code == 401
    pasted = {"username": "saul", "ssh_public_keys": [private_key]}
    assert call("POST", f"{API}/users", admin, json=pasted).status_code == 422
    assert (
        call("PATCH", f"{API}/users/kim", admin, json={"ssh_public_keys": [private_key]}).status_code == 422
    )
    assert call("POST", f"{API}/users", admin, content=f'{{"username": "{private_key}"}}').status_code in (
        400,
        422,
    )
    body: dict[str, Any] = {"schemas": [USER_SCHEMA], "userName": "sara", "password": scim_password}
    assert call("POST", "/scim/v2/Users", scim, json=body).status_code == 201
    body = {"schemas": [USER_SCHEMA], "userName": "sam", "x509Certificates": [{"value": private_key}]}
    call("POST", "/scim/v2/Users", scim, json=body)
    assert call("GET", "/scim/v2/Users", {"Authorization": f"Bearer {wrong}"}).status_code == 401
    access_token = f"opaque-{secrets.token_urlsafe(32)}"
    assert call("GET", "/scim/v2/Users", {"Authorization": f"Bearer {access_token}"}).status_code == 503
    assert call("GET", f"{API}/tokens", admin).status_code == 200

    # A token made through the API: its secret is in that one answer and nowhere else.
    created = call("POST", f"{API}/tokens", admin, json={"name": "ci", "role": "viewer"})
    assert created.status_code == 201, created.text
    new_secret = created.json()["token"]
    assert new_secret.startswith(created.json()["prefix"]) and len(new_secret) > 40
    answers.pop()
    assert call("GET", f"{API}/users", {"Authorization": f"Bearer {new_secret}"}).status_code == 200
    call("GET", f"{API}/tokens", admin)
    call("GET", f"{API}/audit", admin)
    call("GET", "/readyz", {})
    call("GET", "/metrics", {})
    call("GET", f"{API}/plan", admin)
    wait_until(lambda: stack.in_kube("sara"), what="sara provisioned")
    plan = stack.sup("plan", "--json")
    server.stop()

    log = server.log_path.read_text()
    assert '"request_id"' in log  # the log is the JSON one, with request ids
    for line in log.splitlines():
        if line.startswith("{"):
            json.loads(line)
    everything = {"log": log, "answers": "\n".join(answers), "plan": plan}
    needles = {
        "admin token": admin["Authorization"].split()[1],
        "operator token": operator["Authorization"].split()[1],
        "scim token": scim["Authorization"].split()[1],
        "wrong token": wrong,
        "api-created token": new_secret,
        "ldap bind password": bind_password,
        "scim password": scim_password,
        "scim oauth client secret": oauth_secret,
        "scim oauth access token": access_token,
        **{f"ssh private key line {i}": line for i, line in enumerate(_key_material(private_key))},
        **{f"kube client key line {i}": line for i, line in enumerate(_key_material(kube_key))},
    }
    leaks = [f"{what} in {where}" for what, needle in needles.items() for where, text in everything.items()
             if needle in text]  # fmt: skip
    assert not leaks, leaks
