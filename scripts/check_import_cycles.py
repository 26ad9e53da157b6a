"""Fail on import cycles between the modules of this repository's packages.

Why a script of its own: import-linter's ``acyclic_siblings`` contract looks for cycles between sibling *packages*
(a subpackage counts as one node), not between modules, and has no way to tolerate a known cycle while it is being
taken apart. This checker works on the module graph that grimp (import-linter's engine) builds, where every import
counts, those inside functions and ``if TYPE_CHECKING:`` blocks included: a cycle hidden in a function is still a
cycle of design, and the first call that runs it pays for it.

Every strongly connected component of two or more modules is a cycle. Each is printed as the modules it joins and a
few chains ``a -> b -> ... -> a`` that together pass through all of them, each link with the line numbers of the
import statements, so that it shows where to cut.

Configuration, in ``pyproject.toml``::

    [tool.omnieval.import-cycles]
    packages = ["omnieval"]              # the packages whose modules are checked (one graph across them)
    allowed = [                          # cycles tolerated for now: each entry the exact set of modules of one
        ["pkg.a", "pkg.b"],              # strongly connected component
    ]

An allowed entry must match a component exactly: a cycle that grows (a new module joins it) is reported as new, and
an entry whose cycle has shrunk or gone makes the check fail too, naming the entry, so the list cannot go stale.

Usage: ``python scripts/check_import_cycles.py [--root DIR] [--config FILE]`` (default: the repository this script is
in, and its ``pyproject.toml``). Exit status 0: no cycles beyond the allowed ones, each of which still occurs; 1
otherwise; 2 for a bad configuration.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

import grimp
import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import import_view  # noqa: E402 - a sibling script, found through the line above

REPO = Path(__file__).resolve().parent.parent
MAX_CHAINS = 8  # per cycle: enough to show every module of a small cycle, not a wall of text for a big one


class ConfigError(Exception):
    pass


def read_config(path: Path) -> tuple[list[str], list[frozenset[str]]]:
    """``(packages, allowed cycles)`` from the ``[tool.omnieval.import-cycles]`` table of ``path``."""
    try:
        table = tomllib.loads(path.read_text())["tool"]["omnieval"]["import-cycles"]
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except KeyError:
        raise ConfigError(f"{path}: no [tool.omnieval.import-cycles] table") from None
    packages = table.get("packages")
    if not packages or not all(isinstance(p, str) for p in packages):
        raise ConfigError(f"{path}: [tool.omnieval.import-cycles] packages must be a non-empty list of names")
    allowed = []
    for i, entry in enumerate(table.get("allowed", [])):
        if not isinstance(entry, list) or len(set(entry)) < 2 or not all(isinstance(m, str) for m in entry):
            raise ConfigError(f"{path}: [tool.omnieval.import-cycles] allowed[{i}] must list two or more distinct "
                              f"module names, got {entry!r}")
        allowed.append(frozenset(entry))
    return packages, allowed


def module_graph(packages: list[str]) -> tuple[grimp.ImportGraph, nx.DiGraph]:
    """grimp's graph of ``packages`` (internal modules only) and the same edges as a networkx digraph."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    digraph = nx.DiGraph()
    digraph.add_nodes_from(graph.modules)
    for module in graph.modules:
        digraph.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module)
                               if imported != module)
    return graph, digraph


def cycles(digraph: nx.DiGraph) -> list[frozenset[str]]:
    """Every strongly connected component of two or more modules, largest first."""
    found = [frozenset(c) for c in nx.strongly_connected_components(digraph) if len(c) > 1]
    return sorted(found, key=lambda c: (-len(c), sorted(c)))


def covering_chains(digraph: nx.DiGraph, component: frozenset[str]) -> list[list[str]]:
    """Shortest cycles through the component's modules (in name order) until each module is on one, at most
    ``MAX_CHAINS``. Each chain starts and ends with the same module."""
    sub = digraph.subgraph(component)
    chains: list[list[str]] = []
    covered: set[str] = set()
    for module in sorted(component):
        if module in covered:
            continue
        if len(chains) == MAX_CHAINS:
            break
        back = [nx.shortest_path(sub, nxt, module) for nxt in sorted(sub.successors(module))]
        chain = [module, *min(back, key=len)]
        chains.append(chain)
        covered.update(chain)
    return chains


def source_file(root: Path, module: str) -> str:
    """The file of ``module`` relative to ``root`` (``pkg/mod.py`` or ``pkg/sub/__init__.py``; ``kernels/...`` for
    ``omnieval.kernels``)."""
    for is_package in (True, False):
        path = import_view.source_file(module, is_package)
        if (root / path).is_file():
            return path
    return import_view.source_file(module, False)


def describe(graph: grimp.ImportGraph, digraph: nx.DiGraph, component: frozenset[str], root: Path) -> list[str]:
    """The lines that report one cycle: its modules, then each chain with the import lines of each link."""
    lines = [f"import cycle among {len(component)} modules: {', '.join(sorted(component))}"]
    chains = covering_chains(digraph, component)
    for chain in chains:
        lines.append("  " + " -> ".join(chain))
        for importer, imported in zip(chain, chain[1:], strict=False):
            details = graph.get_import_details(importer=importer, imported=imported)
            at = ", ".join(str(d["line_number"]) for d in sorted(details, key=lambda d: d["line_number"]))
            lines.append(f"    {importer} -> {imported}: {source_file(root, importer)} line {at}")
    if len(chains) == MAX_CHAINS and set().union(*chains) != component:
        lines.append(f"  (first {MAX_CHAINS} chains shown)")
    return lines


def check(root: Path, config: Path) -> tuple[int, list[str]]:
    """``(exit status, report lines)`` for the packages under ``root``."""
    packages, allowed = read_config(config)
    import_view.use_view(root)  # the tree under review, not an installed copy, with omnieval.kernels inside omnieval
    graph, digraph = module_graph(packages)
    found = cycles(digraph)
    report, status = [], 0
    for component in found:
        if component in allowed:
            report.append(f"allowed (pyproject.toml [tool.omnieval.import-cycles]): cycle among "
                          f"{', '.join(sorted(component))}")
            continue
        status = 1
        report.extend(describe(graph, digraph, component, root))
    for entry in allowed:
        if entry not in found:
            status = 1
            now = [c for c in found if c & entry]
            hint = (" (its modules now form: " + "; ".join(", ".join(sorted(c)) for c in now) + ")") if now else ""
            report.append(f"allowed cycle no longer occurs: {', '.join(sorted(entry))}{hint}; update "
                          "[tool.omnieval.import-cycles] allowed in pyproject.toml")
    edges = digraph.number_of_edges()
    report.append(f"{'FAILED' if status else 'OK'}: {len(found)} import cycle(s) among {len(digraph)} modules and "
                  f"{edges} imports of {', '.join(packages)} ({sum(c in allowed for c in found)} allowed)")
    return status, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO, help="folder holding the packages (default: this repo)")
    parser.add_argument("--config", type=Path, help="pyproject.toml to read (default: ROOT/pyproject.toml)")
    args = parser.parse_args(argv)
    try:
        status, report = check(args.root.resolve(), args.config or args.root / "pyproject.toml")
    except ConfigError as exc:
        print(f"check_import_cycles: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report))
    return status


if __name__ == "__main__":
    sys.exit(main())
