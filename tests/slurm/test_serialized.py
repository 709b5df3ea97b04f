"""One writer per slurmdbd: two processes applying at once take turns, through the host lock
(flock in lock_dir) or through the store's lock (what excludes replicas on other hosts)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm import helpers as h
from tests.support.slurmdbd import SlurmdbdServer

APPLY = """
import json, sys
from sup.config import Settings
from sup.config.targets import target_context
from sup.reconcile.targets import store_lock
from sup.store.session import make_engine
from sup.targets.base import CREATE, Change
from sup.targets.slurm import SPEC, SlurmTarget
from sup.targets.slurm.model import AssociationChange

url, section, cluster, users = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
settings = Settings(database_url=url, slurm=section)
target = SlurmTarget(target_context(SPEC, settings, store_lock(make_engine(url))))
changes = [
    Change("slurm", CREATE, "association", f"phys/{u}", AssociationChange(cluster, "phys", u))
    for u in users
]
report = target.apply(changes)
target.close()
print(len(report.applied), len(report.failed))
"""

# Logs the start and end of every write (reads pass straight through), in nanoseconds. {write} is
# the real sacctmgr, or for the control a stand-in that writes nothing: parallel writers can crash
# slurmdbd, which the rest of the session needs.
WRAPPER = """#!/bin/sh
if [ "$1" != "-i" ]; then exec {sacctmgr} "$@"; fi
echo "start $$ $(date +%s%N)" >> {log}
{write}
rc=$?
echo "end $$ $(date +%s%N)" >> {log}
exit $rc
"""


def _intervals(log: Path) -> list[tuple[int, int]]:
    starts: dict[str, int] = {}
    intervals = []
    for line in log.read_text().splitlines():
        event, pid, at = line.split()
        if event == "start":
            starts[pid] = int(at)
        else:
            intervals.append((starts.pop(pid), int(at)))
    return sorted(intervals)


def _overlaps(intervals: list[tuple[int, int]]) -> int:
    return sum(1 for (_, end), (start, _) in itertools.pairwise(intervals) if start < end)


@pytest.mark.parametrize(
    ("same_lock_dir", "same_store", "serialized"),
    [
        pytest.param(True, False, True, id="host-lock"),
        pytest.param(False, True, True, id="store-lock-sqlite"),
        pytest.param(False, "postgresql", True, id="store-lock-postgresql", marks=pytest.mark.postgres),
        # Control: without a shared lock the log does show overlapping writes (stand-in writes).
        pytest.param(False, False, False, id="no-shared-lock"),
    ],
)
def test_two_processes_write_one_at_a_time(
    slurmdbd: SlurmdbdServer,
    cluster: str,
    tmp_path: Path,
    same_lock_dir: bool,
    same_store: bool | str,
    serialized: bool,
    request: pytest.FixtureRequest,
) -> None:
    slurmdbd.sacctmgr("add", "account", "phys", f"cluster={cluster}")
    log = tmp_path / "writes.log"
    wrapper = tmp_path / "sacctmgr"
    real = slurmdbd.bin["sacctmgr"]
    write = f'{real} "$@"' if serialized else "sleep 0.3"
    wrapper.write_text(WRAPPER.format(sacctmgr=real, log=log, write=write))
    wrapper.chmod(0o755)
    processes = []
    for side in ("a", "b"):
        store = f"sqlite:///{tmp_path / ('store.db' if same_store else f'store-{side}.db')}"
        if same_store == "postgresql":  # an advisory lock: what excludes replicas on other hosts
            store = request.getfixturevalue("postgres").url()
        lock_dir = tmp_path / ("locks" if same_lock_dir else f"locks-{side}")
        section = {"cluster": cluster, "sacctmgr": str(wrapper), "lock_dir": str(lock_dir), "chunk_size": 1}
        users = ",".join(f"{side}{i}" for i in range(8))
        argv = [sys.executable, "-c", APPLY, store, json.dumps(section), cluster, users]
        processes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
        assert out.split() == ["8", "0"]
    intervals = _intervals(log)
    assert len(intervals) == 16
    assert (_overlaps(intervals) == 0) is serialized, intervals
    if serialized:
        stored = {u for _, u, _ in h.associations(slurmdbd, cluster)}
        assert stored == {f"{s}{i}" for s in "ab" for i in range(8)}
