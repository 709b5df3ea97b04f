"""The gateway asks the idle reporters of the pods SUP says may sleep soon, and tells SUP what they
said in its heartbeat (docs/ssh-gateway.md, "Scale to zero"). The reporter is the login image's own
(socat running images/login/sup-login-idle) in a PID namespace of its own, where a `sleep` started
by "the person" is what a tmux or a nohup job would be in the login container."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.gateway.scenario import GatewayScenario
from tests.support.gateway_api import GatewayApiStandIn, pod
from tests.support.idle_reporter import IdleReporter, ReporterUnavailable
from tests.support.ports import free_port
from tests.support.sshd import SshdUnavailable, StandInPod


@pytest.fixture
def reporter() -> Iterator[IdleReporter]:
    try:
        running = IdleReporter().start()
    except ReporterUnavailable as exc:
        pytest.skip(str(exc))
    yield running
    running.stop()


def _polls(result: str) -> float:
    return REGISTRY.get_sample_value("sup_gateway_idle_polls_total", {"result": result}) or 0.0


def _reported(api: GatewayApiStandIn, busy: list[dict[str, Any]]) -> Callable[[], bool]:
    return lambda: bool(api.heartbeats) and api.heartbeats[-1]["busy"] == busy


def test_what_the_person_runs_makes_the_pod_busy_and_a_dead_reporter_silent(
    scenario: GatewayScenario, reporter: IdleReporter
) -> None:
    api = scenario.api
    nobody_listens = free_port()
    api.awake = [pod("login", "alice", reporter.port), pod("lab", "lab", nobody_listens, kind="group")]
    before = {result: _polls(result) for result in ("busy", "idle", "silent")}
    scenario.start_gateway()

    # nothing of alice's runs: idle; nothing answers for lab: silent (SUP holds it up to max_awake)
    lab = {"kind": "group", "name": "lab", "busy": None}
    api.wait_for(_reported(api, [lab, {"kind": "user", "name": "alice", "busy": False}]), timeout=30)

    # a connection to sshd nobody has logged in on yet (the readiness probe's, a scanner's) is not hers
    reporter.run_as_person(title="sshd: [accepted]")
    reporter.run_as_person(title="sshd: alice [preauth]")
    asked = _polls("idle") + _polls("busy")
    api.wait_for(lambda: _polls("idle") + _polls("busy") >= asked + 2, timeout=30)  # asked since
    assert api.heartbeats[-1]["busy"] == [lab, {"kind": "user", "name": "alice", "busy": False}]
    reporter.stop_persons_processes()

    reporter.run_as_person()  # alice left something running
    api.wait_for(_reported(api, [lab, {"kind": "user", "name": "alice", "busy": True}]), timeout=30)

    reporter.stop_persons_processes()
    api.wait_for(_reported(api, [lab, {"kind": "user", "name": "alice", "busy": False}]), timeout=30)

    reporter.stop()  # the reporter died (or the person killed it)
    api.wait_for(_reported(api, [lab, {"kind": "user", "name": "alice", "busy": None}]), timeout=30)
    assert all(_polls(result) > before[result] for result in ("busy", "idle", "silent"))


def test_only_the_pods_sup_names_are_asked(scenario: GatewayScenario, reporter: IdleReporter) -> None:
    api = scenario.api
    reporter.run_as_person()
    scenario.start_gateway()
    api.wait_for(lambda: len(api.heartbeats) >= 2, timeout=30)
    assert all(beat["busy"] == [] for beat in api.heartbeats)  # SUP named none: none asked

    api.awake = [pod("login", "alice", reporter.port)]
    api.wait_for(_reported(api, [{"kind": "user", "name": "alice", "busy": True}]), timeout=30)
    api.awake = []  # alice's pod was stamped in use: no longer near sleep
    api.wait_for(_reported(api, []), timeout=30)


@pytest.fixture
def reporter_beside_sshd(tmp_path: Path, openssh: None) -> Iterator[tuple[IdleReporter, int]]:
    """The reporter in a namespace whose PID 1 is a real sshd, as in a login pod; and sshd's port."""
    try:
        pod = StandInPod(tmp_path / "pod", free_port(), [])
        running = IdleReporter(sshd_config=pod.config).start()
    except (ReporterUnavailable, SshdUnavailable) as exc:
        pytest.skip(str(exc))
    yield running, pod.port
    running.stop()


def test_the_readiness_probes_connections_to_sshd_are_nobodys_and_an_orphaned_job_is_the_persons(
    reporter_beside_sshd: tuple[IdleReporter, int],
) -> None:
    """A TCP probe's connection to sshd (connect, close: kubelet's readiness probe every few seconds)
    makes a child of sshd's listener that lives a few ms, and before it takes a title of its own
    (`sshd: [accepted]`) it is a copy of the listener, then sshd re-executing itself, and it exits
    with no command line left: none of that is the person's. Probes back to back, 300 asks: never
    busy (the field saw 2 busy answers in ~115 polls; here, before, most answers were). A job the
    person left running, reparented to sshd's listener when its session closed, still counts."""
    reporter, sshd_port = reporter_beside_sshd
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", sshd_port), timeout=5):
                pass

    probes = [threading.Thread(target=probe) for _ in range(2)]
    for thread in probes:
        thread.start()
    try:
        assert Counter(reporter.ask() for _ in range(300)) == {0: 300}
        reporter.run_as_person(orphan=True)  # `nohup job &`, then logout
        assert Counter(reporter.ask() for _ in range(50)) == {1: 50}
        # a process of the person's named like sshd's is still theirs unless sshd's listener is its
        # parent: only a child of PID 1 in one of those forms is taken for a probe's
        reporter.run_as_person(title="/usr/sbin/sshd")
        assert Counter(reporter.ask() for _ in range(50)) == {2: 50}
    finally:
        stop.set()
        for thread in probes:
            thread.join()
