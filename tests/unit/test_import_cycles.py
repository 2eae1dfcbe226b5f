"""No import cycle among the modules of the client and the broker.

A module imports another when it names it in an import statement, absolute
(``airflow_pulsar.client...``) or relative, at any scope: inside a function too, and type-only
imports under ``TYPE_CHECKING`` as well (they tie the modules together for readers and type
checkers just the same).

Package ``__init__`` modules count as Python runs them:

- Importing ``a.b.c`` at run time runs the ``__init__`` of each package on the way (``a.b``), so
  the importer depends on those too; except on its own packages, which Python imports before the
  importer itself (counting them would put every ``__init__`` that imports its package's modules
  in a cycle with each of them, which is how packages load, not a dependency).
- A type-only import runs nothing: it depends on the module it names alone.
- ``from P import x`` depends on the module ``P.x`` if there is one (so ``from . import x`` in an
  ``__init__`` depends on its submodule ``x``), else on ``P``'s ``__init__``, which defines ``x``:
  from one of ``P``'s own modules too, where that is the classic half-initialised-package cycle.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.import_statements import SourceModule, import_statements, source_modules

ROOT = Path(__file__).resolve().parents[2]
# Import name of each folder (pyproject.toml's package-dir).
PACKAGES = {"airflow_pulsar.client": ROOT / "client", "airflow_pulsar.broker": ROOT / "broker"}

Graph = dict[str, set[str]]


def _packages_above(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def import_graph(modules: dict[str, SourceModule]) -> Graph:
    """Module -> the modules among ``modules`` it depends on, by the rules of this file's docstring."""
    graph: Graph = {}
    for name, module in modules.items():
        targets: set[tuple[str, bool]] = set()  # (module, runs its packages' __init__)
        for statement in import_statements(module):
            runs = not statement.type_only
            if not statement.names:
                targets.add((statement.module, runs))
            for imported in statement.names:
                submodule = f"{statement.module}.{imported}"
                targets.add((submodule if submodule in modules else statement.module, runs))
        edges = set()
        for target, runs in targets:
            edges.add(target)
            if runs:
                edges.update(_packages_above(target) - _packages_above(name))
        graph[name] = {target for target in edges if target in modules and target != name}
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle of ``graph`` as a path of module names, first and last the same, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_no_import_cycle_in_the_client_or_the_broker() -> None:
    graph = import_graph(source_modules(PACKAGES))
    assert len(graph) > 100
    # The graph holds what the rules say (else an empty one would pass): a relative import, a
    # type-only one, the broker's absolute imports of the client and the client's __init__ they run.
    assert "airflow_pulsar.client.consumer.dead_letter" in graph["airflow_pulsar.client.consumer.settings"]
    assert "airflow_pulsar.client.services" in graph["airflow_pulsar.client.consumer.dead_letter_processor"]
    assert {"airflow_pulsar.client", "airflow_pulsar.client.protocol.checksum"} <= graph["airflow_pulsar.broker.producer_commands"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _package(root: Path, files: dict[str, str]) -> dict[str, SourceModule]:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return source_modules({"pkg": root / "pkg"})


def test_a_cycle_through_a_function_scope_or_a_type_only_import_is_found(tmp_path: Path) -> None:
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from .b import B\n",
            "b.py": "B = 1\n\ndef late():\n    from pkg import a\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
            "d.py": "import pkg.c\nD = 1\n",
        },
    )
    graph = import_graph(modules)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.d"} and graph["pkg.d"] == {"pkg.c"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_package_inits_count_as_python_runs_them(tmp_path: Path) -> None:
    modules = _package(
        tmp_path,
        {
            "__init__.py": "from . import sub\nfrom .sub.x import X\nHELPER = 1\n",
            "sub/__init__.py": "from .x import X\n",
            "sub/x.py": "from . import y\nfrom .. import tools\nX = 1\n",
            "sub/y.py": "",
            "tools.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.y import Y\n",
            "other/__init__.py": "from .user import USER\n",
            "other/user.py": "from ..sub.y import Y\n",
        },
    )
    graph = import_graph(modules)
    # ``from . import sub`` is the subpackage; a module's own packages are not its dependencies.
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.x"}
    assert graph["pkg.sub.x"] == {"pkg.sub.y", "pkg.tools"}
    # A run-time import of pkg.sub.y runs pkg.sub's __init__; a type-only one does not.
    assert graph["pkg.other.user"] == {"pkg.sub", "pkg.sub.y"}
    assert graph["pkg.tools"] == {"pkg.sub.y"}
    assert find_cycle(graph) is None

    # A name of the package's __init__ imported by a module the __init__ imports: a cycle.
    (tmp_path / "pkg" / "sub" / "y.py").write_text("from .. import HELPER\n")
    assert find_cycle(import_graph(modules)) == ["pkg", "pkg.sub", "pkg.sub.x", "pkg.sub.y", "pkg"]
