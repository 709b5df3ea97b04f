"""Nested groups flattened: the members of a group are its own members and those of every group
nested in it, at any depth.

The nesting is a graph, not necessarily a tree: an IdP may send a group that contains itself, or two
groups that contain each other. A cycle is not an error here and never a loop: every group in a cycle
(a strongly connected component of the nesting graph) contains every other, so they all get the same
members, and the cycle is reported so the caller can log it. Tarjan's algorithm, written without
recursion so a deep nesting cannot exhaust the stack.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Generic, TypeVar

G = TypeVar("G", bound=Hashable)
U = TypeVar("U", bound=Hashable)


@dataclass(frozen=True)
class Flattened(Generic[G, U]):
    """The effective members of each group, and the cycles found (each a tuple of
    the groups that contain one another; a group that contains itself is a cycle of one)."""

    members: dict[G, frozenset[U]]
    cycles: list[tuple[G, ...]] = field(default_factory=list)


def flatten(direct: Mapping[G, Set[U]], children: Mapping[G, Iterable[G]]) -> Flattened[G, U]:
    """`direct`: group -> its own (user) members; `children`: group -> the groups nested in it.

    Every group named in either mapping (as a key or as a child) gets an entry; a group with no
    members of its own and no children has none. Groups are visited in the mappings' order, so the
    result does not depend on hash order."""
    nodes: dict[G, None] = dict.fromkeys(direct)
    for parent, kids in children.items():
        nodes.setdefault(parent)
        for kid in kids:
            nodes.setdefault(kid)
    edges: dict[G, list[G]] = {g: list(dict.fromkeys(children.get(g, ()))) for g in nodes}

    components = _strongly_connected(list(nodes), edges)  # in reverse topological order
    component_of: dict[G, int] = {}
    for index, component in enumerate(components):
        for group in component:
            component_of[group] = index

    members: dict[G, frozenset[U]] = {}
    cycles: list[tuple[G, ...]] = []
    for index, component in enumerate(components):
        found: set[U] = set()
        for group in component:
            found.update(direct.get(group, ()))
            for kid in edges[group]:
                if component_of[kid] != index:  # an earlier component: already complete
                    found.update(members[kid])
        frozen = frozenset(found)
        for group in component:
            members[group] = frozen
        if len(component) > 1 or component[0] in edges[component[0]]:
            cycles.append(tuple(component))
    return Flattened(members=members, cycles=cycles)


def _strongly_connected(nodes: list[G], edges: Mapping[G, list[G]]) -> list[list[G]]:
    """Tarjan's strongly connected components, iteratively; each component is emitted after every
    component it reaches (reverse topological order)."""
    index: dict[G, int] = {}
    low: dict[G, int] = {}
    on_stack: set[G] = set()
    stack: list[G] = []
    result: list[list[G]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[G, int]] = [(root, 0)]
        while work:
            node, next_edge = work.pop()
            if next_edge == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            kids = edges[node]
            for position in range(next_edge, len(kids)):
                kid = kids[position]
                if kid not in index:
                    work.append((node, position + 1))
                    work.append((kid, 0))
                    recurse = True
                    break
                if kid in on_stack:
                    low[node] = min(low[node], index[kid])
            if recurse:
                continue
            if low[node] == index[node]:
                component: list[G] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                result.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return result
