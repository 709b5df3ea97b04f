"""The planner and the passwd reading (pure): what is made, fixed, moved and refused."""

from __future__ import annotations

from sup.home_dirs.plan import MISSING, Entry, Kind, plan
from sup.home_dirs.wanted import Home, wanted


def line(name: str, uid: int, home: str, gid: int | None = None) -> str:
    return f"{name}:x:{uid}:{uid if gid is None else gid}:{name}:{home}:/bin/bash\n"


def test_each_person_once_though_in_several_login_files() -> None:
    files = {
        "login-alice": line("alice", 2001, "/home/alice"),
        "group-lab": line("alice", 2001, "/home/alice") + line("bob", 2002, "/home/lab/bob"),
    }
    want = wanted(files, "/home")
    assert want.refused == []
    assert want.homes == {
        ("alice",): Home(("alice",), 2001, 2001, ("alice",)),
        ("lab", "bob"): Home(("lab", "bob"), 2002, 2002, ("bob",)),
    }


def test_homes_outside_the_root_or_odd_are_refused_and_not_wanted() -> None:
    files = {
        "login": line("out", 2001, "/srv/out")
        + line("root", 2002, "/home")
        + line("dots", 2003, "/home/../etc")
        + line("rel", 2004, "home/rel")
        + line("twice", 2005, "/home//twice")
        + line("prefix", 2006, "/homefoo")
        + line("zero", 0, "/home/zero")
        + "garbage line\n"
    }
    want = wanted(files, "/home")
    assert want.homes == {}
    refused = " ".join(r.reason for r in want.refused)
    for name in ("out", "root", "dots", "rel", "twice", "prefix", "zero"):
        assert f"{name}:" in refused or f"{name} has uid 0" in refused
    assert any("not a passwd line" in r.reason for r in want.refused)
    assert len(want.refused) == 8


def test_one_path_for_two_uids_is_refused_for_both() -> None:
    want = wanted({"a": line("alice", 2001, "/home/x"), "b": line("bob", 2002, "/home/x")}, "/home")
    assert want.homes == {}
    assert want.taken == {("x",)}
    assert "2 uids" in want.refused[0].reason


def test_a_uid_wanted_at_two_paths_waits_until_the_files_agree() -> None:
    files = {"login-a": line("alice", 2001, "/home/alice"), "group-lab": line("alicia", 2001, "/home/alicia")}
    want = wanted(files, "/home")
    assert want.homes == {}
    assert {r.what for r in want.refused} == {"alice", "alicia"}


def test_a_home_inside_another_persons_home_is_refused() -> None:
    want = wanted({"a": line("alice", 2001, "/home/alice") + line("bob", 2002, "/home/alice/bob")}, "/home")
    assert list(want.homes) == [("alice",)]
    assert want.refused[0].what == "alice/bob"
    assert "inside the home alice" in want.refused[0].reason


ALICE = Home(("alice",), 2001, 2001, ("alice",))
BOB = Home(("bob",), 2002, 2002, ("bob",))


def test_missing_is_made_own_is_kept_kubelets_empty_root_dir_is_fixed() -> None:
    homes = {ALICE.rel: ALICE, BOB.rel: BOB}
    steps = plan(homes, {ALICE.rel: MISSING, BOB.rel: Entry(Kind.DIR, 0, 0, empty=True)})
    assert (steps.make, steps.fix, steps.keep, steps.refuse) == ([ALICE], [BOB], [], [])
    steps = plan(homes, {ALICE.rel: Entry(Kind.DIR, 2001, 100), BOB.rel: Entry(Kind.DIR, 2002, 2002)})
    assert (steps.keep, steps.make, steps.fix) == ([ALICE, BOB], [], [])


def test_another_uids_directory_a_symlink_a_file_or_a_full_root_dir_is_refused() -> None:
    for entry, says in [
        (Entry(Kind.DIR, 2002, 2002), "owned by uid 2002, not 2001"),
        (Entry(Kind.SYMLINK, 2001, 2001), "symlink"),
        (Entry(Kind.OTHER, 2001, 2001), "not a directory"),
        (Entry(Kind.DIR, 0, 0, empty=False), "root-owned directory that is not empty"),
        (Entry(Kind.BLOCKED, why="the parent lab is not owned by root"), "not owned by root"),
    ]:
        steps = plan({ALICE.rel: ALICE}, {ALICE.rel: entry})
        assert steps.homes() == []
        assert len(steps.refuse) == 1 and says in steps.refuse[0].reason, entry


def test_a_rename_moves_the_uids_old_directory() -> None:
    renamed = Home(("alicia",), 2001, 2001, ("alicia",))
    steps = plan({renamed.rel: renamed}, {renamed.rel: MISSING}, {2001: [("alice",)], 2002: [("bob",)]})
    assert [(m.home, m.source) for m in steps.move] == [(renamed, ("alice",))]
    assert steps.make == []
    # the pod started first and the kubelet made an empty root-owned directory: still moved
    steps = plan(
        {renamed.rel: renamed}, {renamed.rel: Entry(Kind.DIR, 0, 0, empty=True)}, {2001: [("alice",)]}
    )
    assert [m.source for m in steps.move] == [("alice",)]
    # two candidates: which one? refused, nothing made
    steps = plan({renamed.rel: renamed}, {renamed.rel: MISSING}, {2001: [("alice",), ("old", "alice")]})
    assert steps.homes() == [] and "several directories" in steps.refuse[0].reason


def test_a_directory_still_wanted_is_no_rename_source() -> None:
    # scan_orphans never reports wanted paths; the planner never moves a parent into its child
    child = Home(("alice", "new"), 2001, 2001, ("alice",))
    steps = plan({child.rel: child}, {child.rel: MISSING}, {2001: [("alice",)]})
    assert steps.move == [] and steps.make == [child]


def test_nobody_wanted_is_nothing_to_do() -> None:
    want = wanted({"login": ""}, "/home")
    assert (want.homes, want.refused, want.depth) == ({}, [], 3)
    assert plan(want.homes, {}).homes() == []
