"""Nested groups flattened (sup/domain/groups_flatten.py): members of nested groups count, cycles end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sup.domain.groups_flatten import flatten

GROUPS = st.integers(min_value=0, max_value=12)
USERS = st.integers(min_value=100, max_value=130)


def test_a_chain_and_a_cycle() -> None:
    result = flatten(
        {"top": {"ann"}, "mid": {"bob"}, "leaf": {"cid"}, "a": {"x"}, "b": {"y"}},
        {"top": ["mid"], "mid": ["leaf"], "a": ["b"], "b": ["a", "leaf"]},
    )
    assert result.members["top"] == {"ann", "bob", "cid"}
    assert result.members["mid"] == {"bob", "cid"}
    assert result.members["leaf"] == {"cid"}
    assert result.members["a"] == result.members["b"] == {"x", "y", "cid"}
    assert [sorted(c) for c in result.cycles] == [["a", "b"]]


def test_a_group_in_itself_is_a_cycle_of_one() -> None:
    result = flatten({"g": {"u"}}, {"g": ["g", "h"]})
    assert result.members == {"g": {"u"}, "h": frozenset()}
    assert result.cycles == [("g",)]


def test_no_nesting_changes_nothing() -> None:
    result = flatten({"g": {"u"}, "h": set()}, {})
    assert result.members == {"g": {"u"}, "h": frozenset()} and result.cycles == []


def test_deep_nesting_does_not_recurse() -> None:
    depth = 20000
    result = flatten({depth: {"u"}}, {i: [i + 1] for i in range(depth)})
    assert result.members[0] == {"u"} and not result.cycles


@settings(max_examples=300, deadline=None)
@given(
    direct=st.dictionaries(GROUPS, st.frozensets(USERS, max_size=4), max_size=10),
    children=st.dictionaries(GROUPS, st.lists(GROUPS, max_size=4), max_size=10),
)
def test_effective_members_on_random_graphs(
    direct: dict[int, frozenset[int]], children: dict[int, list[int]]
) -> None:
    result = flatten(direct, children)  # terminates, cycles or not
    groups = set(direct) | set(children) | {k for ks in children.values() for k in ks}
    assert set(result.members) == groups
    for group, users in direct.items():
        assert result.members[group] >= users
    for parent, kids in children.items():
        for kid in kids:
            assert result.members[parent] >= result.members[kid]
    # Nothing from nowhere: every member is a direct member of the group or of one reachable from it.
    for group in groups:
        reach, todo = set(), [group]
        while todo:
            g = todo.pop()
            if g not in reach:
                reach.add(g)
                todo.extend(children.get(g, []))
        assert result.members[group] == {u for g in reach for u in direct.get(g, ())}
    # Every cycle is reported, and groups in one cycle share their members.
    for cycle in result.cycles:
        assert len({result.members[g] for g in cycle}) == 1
    in_cycle = {g for c in result.cycles for g in c}
    for parent, kids in children.items():
        if parent in kids:
            assert parent in in_cycle
