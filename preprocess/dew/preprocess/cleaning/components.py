"""Connected components of a graph given as edges, by alternating large-star and small-star rounds.

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014): every round groups each
node with its neighbours (one GroupByKey) and rewires edges towards the smallest node in reach, so no
worker ever holds more than one node's neighbourhood, and no pair list is ever built. With nodes
ordered, each component ends as a star around its smallest node, in O(log² n) rounds.

A Beam graph cannot loop on its data, so the rounds are unrolled `rounds` times, and a last grouping
checks that each component is a star (every node with a smaller neighbour has that neighbour alone);
a graph that needs more rounds fails the job naming the flag, rather than giving wrong clusters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import apache_beam as beam

from dew.data.errors import UserError
from dew.preprocess.quiet import user_error

Edge = tuple[str, str]


class NotConvergedError(UserError, RuntimeError):
    """The components were not stars after the rounds given."""


def _both_ways(edge: Edge) -> Iterator[Edge]:
    u, v = edge
    yield u, v
    yield v, u


def large_star(element: tuple[str, Iterable[str]]) -> Iterator[Edge]:
    """Each larger neighbour of u is rewired to the smallest node of u's closed neighbourhood."""
    u, neighbours = element
    others = set(neighbours)
    m = min(min(others), u)
    for v in others:
        if v > u:
            yield (m, v)


def small_star(element: tuple[str, Iterable[str]]) -> Iterator[Edge]:
    """u and its smaller neighbours are rewired to the smallest of them; an edge to a larger neighbour
    is that neighbour's to rewire."""
    u, neighbours = element
    others = set(neighbours)
    smaller = [v for v in others if v < u]
    m = min(smaller, default=u)
    for v in [*smaller, u]:
        if v != m:
            yield (m, v)


def _root(element: tuple[str, Iterable[str]], rounds: int) -> Iterator[tuple[str, str]]:
    u, neighbours = element
    others = set(neighbours)
    m = min(others)
    if m > u:
        yield u, u
        return
    if len(others) != 1:
        raise user_error(
            NotConvergedError(
                f"the duplicate clusters did not settle in {rounds} rounds of connected components (node {u} "
                f"still has {len(others)} neighbours); rerun with a larger --cc_rounds"
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
