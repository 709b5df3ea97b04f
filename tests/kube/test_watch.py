"""The watch cache against a real kube-apiserver: passes after the first are served from it (no
list), hand edits made between passes are repaired, SUP's own writes are seen by the next pass, and a
broken watch makes the next pass list (watch.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import sup.targets.kube.target as kube_target
from sup.targets.kube import watch
from tests.kube.site import Site


def _lists(site: Site) -> int:
    """List requests the last pass's target sent."""
    return sum(n for (verb, _), n in site.targets[-1].client.requests.items() if verb == "list")


def _cache(site: Site) -> watch.WatchCache:
    (cache,) = watch.caches()
    assert cache.live()
    return cache


def test_a_hand_edit_between_passes_is_repaired_by_a_pass_served_from_the_cache(site: Site) -> None:
    site.add_user("kim")
    site.converge()  # the first pass lists and seeds the cache; the second is served from it
    assert _lists(site) == 0
    assert {verb for verb, _ in _cache(site).requests()} == {"watch"}
    with site.admin() as admin:
        admin.merge_patch(
            site.path("workload", "login-kim"),
            {"spec": {"template": {"spec": {"containers": [{"name": "sshd", "image": "evil:latest"}]}}}},
            fieldManager="kubectl-edit",
        )
        admin.delete(site.path("service", "login-kim"))

    result = site.reconcile()

    assert _lists(site) == 0
    assert {(c.action.value, c.kind, c.name) for c in result.changes} == {
        ("update", "workload", "login-kim"),
        ("create", "service", "login-kim"),
    }
    sts = site.get("workload", "login-kim")
    assert sts is not None and sts["spec"]["template"]["spec"]["containers"][0]["image"] != "evil:latest"
    assert site.get("service", "login-kim") is not None


def test_the_pass_after_a_write_sees_it_from_the_cache_and_writes_nothing(site: Site) -> None:
    site.settle = False  # no help from the test: the pass itself waits for SUP's own writes
    site.add_user("kim")
    site.reconcile()  # lists, seeds the cache
    site.add_user("saul")
    site.update_user("kim", login_shell="/bin/zsh")
    first = site.reconcile()
    assert first.changes and site.last_writes > 0 and _lists(site) == 0
    again = site.reconcile()
    assert again.changes == [] and site.last_writes == 0
    assert _lists(site) == 0


def test_a_label_removed_by_hand_moves_the_object_between_watches_and_is_put_back(site: Site) -> None:
    site.add_user("kim")
    site.converge()
    with site.admin() as admin:
        admin.json_patch(
            site.path("service", "login-kim"),
            [{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}],
        )
    result = site.reconcile()
    assert [(c.action.value, c.kind, c.name) for c in result.changes] == [("update", "service", "login-kim")]
    assert _lists(site) == 0
    assert site.targets[-1].client.requests["get", "services"] == 1  # read in full, as after a list
    site.converge()


def test_a_broken_watch_makes_the_next_pass_list_and_reseed(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "BACKOFF_SECONDS", (60.0, 60.0))  # the cache does not relist by itself
    monkeypatch.setattr(watch, "WAIT_SECONDS", 0.2)
    site.add_user("kim")
    site.converge()
    cache = _cache(site)
    stream = cache._streams["service", watch.OTHERS_STREAM]
    with cache._cond:
        response = stream.response
    assert response is not None
    response.shutdown()  # the connection breaks
    deadline = time.monotonic() + 10
    while cache.live():
        assert time.monotonic() < deadline
        time.sleep(0.02)

    site.reconcile()
    assert _lists(site) == 10  # every kind, both reads: the cache was not trusted
    assert cache.live()  # reseeded by that list
    site.reconcile()
    assert _lists(site) == 0


def test_without_kube_watch_every_pass_lists(make_site: Callable[..., Site]) -> None:
    site = make_site(watch=False)
    site.add_user("kim")
    site.converge()
    assert _lists(site) == 10 and watch.caches() == []


def test_a_process_starts_watches_only_at_its_second_full_pass(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot `sup reconcile` runs one full pass: it never pays for watches."""
    monkeypatch.setattr(watch, "START_AFTER", 1)
    site.add_user("kim")
    site.reconcile()
    (cache,) = watch.caches()
    assert not cache.live() and cache.requests() == {}
    assert not any(t.name.startswith("sup-kube-watch") for t in threading.enumerate())
    site.reconcile()  # lists, and seeds the cache
    assert _lists(site) == 10 and cache.live()
    site.reconcile()
    assert _lists(site) == 0


def test_a_full_pass_with_inputs_unchanged_is_not_planned_again(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unchanged.py: the plan is skipped only while the cache, the store and the settings are as
    they were; an event, a store change or new settings make the next pass plan (and repair)."""
    planned: list[int] = []
    real = kube_target.plan  # type: ignore[attr-defined]  # the name target.py calls

    def counted(*args: Any, **kwargs: Any) -> Any:
        planned.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kube_target, "plan", counted)
    site.add_user("kim")
    site.converge()
    assert site.reconcile().changes == []  # served from the cache: planned nothing, so kept
    before = len(planned)
    assert site.reconcile().changes == [] and site.last_writes == 0
    assert len(planned) == before  # the same inputs: not planned again

    with site.admin() as admin:
        admin.delete(site.path("service", "login-kim"))
    site.settle_watch(_cache(site))
    result = site.reconcile()  # an event since: planned, and the Service is back
    assert [(c.action.value, c.kind, c.name) for c in result.changes] == [("create", "service", "login-kim")]
    site.converge()

    site.add_user("saul")  # the store changed: the desired state differs
    added = site.reconcile().changes
    assert {c.name for c in added} >= {"login-saul"} and {c.subject for c in added} == {"saul"}
    site.converge()
    site.reconcile()
    before = len(planned)
    site.settings = site.with_settings(cpu="2")  # new settings: a new fingerprint
    assert {(c.action.value, c.kind) for c in site.reconcile().changes} == {("update", "workload")}
    assert len(planned) == before + 1
