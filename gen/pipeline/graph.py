"""Dependency graph of sections: cycle detection.

Works on ids only; locating an error in the file is the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class DependencyCycle(ValueError):
    """Raised with `cycle` = [a, b, ..., a] when sections depend on each other in a loop."""

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("dependency cycle: " + " -> ".join(cycle))
        self.cycle = cycle


def find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """The first cycle found walking ids in order, as [a, b, ..., a]; None if acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in deps.get(node, ()):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep in deps and dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in deps:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None
