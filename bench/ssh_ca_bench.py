"""SSH certificates signed per second (issue 29): SUP's whole signing request against the raw floor.

    .venv/bin/python bench/ssh_ca_bench.py [--people 1000] [--seconds 10]

- **floor**: sup/domain/sshcerts.py's `sign_user_certificate` alone, in a loop (the ed25519 signature
  and the certificate's encoding: what no signing service can go below);
- **endpoint**: `POST /api/v1/me/ssh-certificate` through the app in process (FastAPI's TestClient,
  one client, one request at a time, no network): the person's OIDC token checked (signature against
  a local issuer's cached JWKS, the claims), their account found, the key checked against everyone's,
  the certificate signed and its audit entry committed, on a SQLite store of --people people.

Each person asks with their own token and key, round robin. Prints a Markdown table and the load
average before and after. Not a test: nothing here asserts a time. What it does not measure: the
time from approving the device code to a shell in the pod (Keycloak, the gateway and a pod on a node:
not built into a bench yet).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import update  # noqa: E402

from sup.app import create_app  # noqa: E402
from sup.config import Settings  # noqa: E402
from sup.domain import sshcerts  # noqa: E402
from sup.store import migrate  # noqa: E402
from sup.store.audit import Actor  # noqa: E402
from sup.store.models import User  # noqa: E402
from sup.store.session import make_engine, make_sessionmaker  # noqa: E402
from sup.users.bulk import create_users  # noqa: E402
from sup.users.schemas import UserCreate  # noqa: E402
from tests.support.oidc_issuer import LocalIssuer  # noqa: E402
from tests.support.sshd import keygen  # noqa: E402

ACTOR = Actor(name="bench", role="admin")


def _public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def floor(ca: sshcerts.CaKey, seconds: float) -> float:
    keys = [_public_key() for _ in range(64)]
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        sshcerts.sign_user_certificate(
            ca, keys[count % len(keys)], principal="kim", serial=count, key_id=f"sup:kim:{count}",
            now=datetime.now(UTC), lifetime=timedelta(hours=12), extensions=["permit-pty"],
        )  # fmt: skip
        count += 1
    return count / (time.perf_counter() - started)


def endpoint(directory: Path, people: int, seconds: float) -> tuple[float, float]:
    """(certificates per second, the median request in ms) through the app."""
    url = f"sqlite:///{directory / 'sup.db'}"
    migrate.upgrade(url)
    keygen(directory / "ca", "sup-ssh-ca")
    issuer = LocalIssuer()
    settings = Settings(
        database_url=url,
        oidc={"issuer": issuer.issuer, "audience": "sup"},
        ssh_ca={"key_file": str(directory / "ca")},
        ids={"uid_range": {"min": 100000, "max": 100000 + 2 * people}},
    )
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    names = [f"p{n:06d}" for n in range(people)]
    with sessions.begin() as session:
        create_users(session, settings, ACTOR, [UserCreate(username=name) for name in names], "import")
        for name in names:  # as the Keycloak pull stamps them: the token's `sub` finds the account
            session.execute(
                update(User).where(User.username == name).values(source="keycloak", external_id=f"sub-{name}")
            )
    tokens = [issuer.token(f"sub-{name}", preferred_username=name) for name in names]
    keys = [_public_key() for _ in names]
    app = create_app(settings, engine)
    app.state.oidc = issuer.verifier()  # the issuer's documents without HTTP
    durations: list[float] = []
    with TestClient(app) as client:
        started = time.perf_counter()
        count = 0
        while time.perf_counter() - started < seconds:
            n = count % people
            before = time.perf_counter()
            answer = client.post(
                "/api/v1/me/ssh-certificate",
                json={"public_key": keys[n]},
                headers={"Authorization": f"Bearer {tokens[n]}"},
            )
            durations.append(time.perf_counter() - before)
            if answer.status_code != 201:
                raise SystemExit(f"request {count}: {answer.status_code} {answer.text}")
            count += 1
        rate = count / (time.perf_counter() - started)
    engine.dispose()
    durations.sort()
    return rate, durations[len(durations) // 2] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="sup-ssh-ca-bench-") as temporary:
        directory = Path(temporary)
        keygen(directory / "floor-ca", "floor")
        ca = sshcerts.load_ca_key((directory / "floor-ca").read_bytes())
        raw = floor(ca, args.seconds)
        rate, median_ms = endpoint(directory, args.people, args.seconds)
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("| what | certificates/s | median request |")
    print("|---|---:|---:|")
    print(f"| floor: sign_user_certificate alone | {raw:,.0f} | {1000 / raw:.2f} ms |")
    request = f"POST /api/v1/me/ssh-certificate ({args.people:,} people, SQLite)"
    print(f"| {request} | {rate:,.0f} | {median_ms:.2f} ms |")
    print(f"| endpoint / floor | {rate / raw:.2f} | |")


if __name__ == "__main__":
    main()
