"""Named locks exclude every other SUP process using the same store (flock on SQLite, advisory
locks on PostgreSQL), and are released when their holder goes away."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sqlalchemy import Engine

from sup.store.locks import LockTimeout, exclusive

HOLDER = """
import sys, time
from sup.store.locks import exclusive
from sup.store.session import make_engine
with exclusive(make_engine(sys.argv[1]), "reconcile"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_process_cannot_take_the_lock_until_the_first_dies(
    engine: Engine, database_url: str
) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, database_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout), exclusive(engine, "reconcile", timeout=0.3):
            pass
        with exclusive(engine, "another-name", timeout=0):  # other names are independent
            pass
    finally:
        holder.kill()  # SIGKILL: no chance to unlock politely
        holder.wait()
    deadline = time.monotonic() + 10
    with exclusive(engine, "reconcile", timeout=10):
        assert time.monotonic() < deadline
