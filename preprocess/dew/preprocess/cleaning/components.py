"""Connected components of a graph given as edges, by alternating large-star and small-star rounds.

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014): every round groups each
node with its neighbours (one GroupByKey) and rewires edges towards the smallest node in reach, and no
pair list is ever built. Each step reads a node's neighbours in two passes (their minimum, then the
edges it sends) and remembers at most SEEN of them, so a hub (the root of a large cluster, neighbour of
every node of it) is iterated, never held: on a runner that pages large groups, no worker holds it. With nodes
ordered, each component ends as a star around its smallest node, in O(log² n) rounds.

A Beam graph cannot loop on its data, so the rounds are unrolled `rounds` times, and a last grouping
checks that each component is a star (every node with a smaller neighbour has that neighbour alone);
a graph that needs more rounds fails the job naming the flag, rather than giving wrong clusters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

import apache_beam as beam

from dew.data.errors import UserError
from dew.preprocess.quiet import user_error

# A node: any ordered value; the clean job's are 9 bytes (dew.preprocess.cleaning.plan.node).
N = TypeVar("N", str, bytes)


class NotConvergedError(UserError, RuntimeError):
    """The components were not stars after the rounds given."""


def _both_ways(edge: tuple[N, N]) -> Iterator[tuple[N, N]]:
    u, v = edge
    yield u, v
    yield v, u


# The most distinct neighbours of one node a step remembers, to send each edge once; past that (a hub:
# the root of a cluster of a million near copies) it sends an edge per neighbour as it comes, repeats
# included. A repeated edge changes no neighbour set, so no step's decision, only how many edges travel.
SEEN = 4096


def _distinct(values: Iterable[N]) -> Iterator[N]:
    """`values` without repeats among the first SEEN distinct ones; every value past those as it comes."""
    seen: set[N] = set()
    for value in values:
        if value in seen:
            continue
        if len(seen) < SEEN:
            seen.add(value)
        yield value


def large_star(element: tuple[N, Iterable[N]]) -> Iterator[tuple[N, N]]:
    """Each larger neighbour of u is rewired to the smallest node of u's closed neighbourhood.

    Two passes over the neighbours (their minimum, then the edges), so a hub's list is iterated, not held."""
    u, neighbours = element
    m = min(min(neighbours), u)
    for v in _distinct(neighbours):
        if v > u:
            yield (m, v)


def small_star(element: tuple[N, Iterable[N]]) -> Iterator[tuple[N, N]]:
    """u and its smaller neighbours are rewired to the smallest of them; an edge to a larger neighbour
    is that neighbour's to rewire. Two passes, as large_star."""
    u, neighbours = element
    m = min((v for v in neighbours if v < u), default=u)
    for v in _distinct(neighbours):
        if v < u and v != m:
            yield (m, v)
    if m != u:
        yield (m, u)


def _root(element: tuple[N, Iterable[N]], rounds: int) -> Iterator[tuple[N, N]]:
    """A node and the root of its star: itself when it is the smallest of its neighbourhood, else its one
    neighbour. Two passes: the minimum, then (for a leaf) whether any neighbour is not that minimum."""
    u, neighbours = element
    m = min(neighbours)
    if m > u:
        yield u, u
        return
    if any(v != m for v in neighbours):
        raise user_error(
            NotConvergedError(
                f"the duplicate clusters did not settle in {rounds} rounds of connected components (node "
                f"{u.hex() if isinstance(u, bytes) else u} still has more than one neighbour); rerun with a "
                "larger --cc_rounds"
            )
        )
    yield u, m


class ConnectedComponents(beam.PTransform):
    """PCollection[(node, node)] edges → (node, smallest node of its component) for every node of an edge."""

    def __init__(self, rounds: int, label: str | None = None) -> None:
        super().__init__(label)
        if rounds < 1:
            raise ValueError(f"connected components need at least one round, got {rounds}")
        self.rounds = rounds

    def expand(self, edges: beam.PCollection) -> beam.PCollection:
        for i in range(self.rounds):
            for name, step in (("Large", large_star), ("Small", small_star)):
                edges = (
                    edges
                    | f"{name}BothWays{i}" >> beam.FlatMap(_both_ways)
                    | f"{name}Neighbours{i}" >> beam.GroupByKey()
                    | f"{name}Star{i}" >> beam.FlatMap(step)
                )
        return (
            edges
            | "FinalBothWays" >> beam.FlatMap(_both_ways)
            | "FinalNeighbours" >> beam.GroupByKey()
            | "Roots" >> beam.FlatMap(_root, self.rounds)
        )
