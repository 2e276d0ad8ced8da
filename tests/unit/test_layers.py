"""The import directions of ARCHITECTURE.md's map, read from the source with `ast`.

scheduler_project -> web apps (API, console, live, admin) -> core (the rest of `jobs`);
worker -> core; the jobs app's management commands -> web helpers and core. Nothing imports
upwards, web and worker never import each other, and no modules import each other in a
circle. The development services (`scheduler_project.devservices`, behind `make run` and
`make test`) drive the application through `manage.py` subprocesses and import none of it.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scheduler_project", "jobs", "worker")
# Longest prefix wins; a module under `jobs` in none of the web prefixes is core.
LAYER_OF_PREFIX = {
    "scheduler_project": "project",
    "jobs.api": "web",
    "jobs.console": "web",
    "jobs.live": "web",
    "jobs.admin": "web",
    "jobs.management": "commands",
    "worker": "worker",
    "jobs": "core",
    "scheduler_project.devservices": "devservices",
}
# What each layer may import besides itself.
MAY_IMPORT = {
    "project": {"web", "worker", "core"},
    "commands": {"web", "core"},
    "web": {"core"},
    "worker": {"core"},
    "core": set(),
    "devservices": set(),
}
# The state machine hands events to the notifier and knows none of its subscribers.
SUBSCRIBERS = {"jobs.events", "jobs.stats", "jobs.webhooks", "jobs.live"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The first-party modules `name` imports anywhere in its body (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from jobs import state` imports the module jobs.state.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {_owner(module) for module in found if _owner(module)} - {name}


def _owner(module: str) -> str:
    """The first-party module that `module` names (a name inside it resolves to it)."""
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module


def _layer(module: str) -> str:
    prefix = max((p for p in LAYER_OF_PREFIX if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF_PREFIX[prefix]


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_walk_sees_the_packages_and_their_imports() -> None:
    # Guards the walk itself: a broken resolver would find no imports and pass everything.
    assert "jobs.state" in GRAPH["worker.worker"]
    assert "jobs.registry" in GRAPH["worker.processor"]
    assert "jobs.notifier" in GRAPH["jobs.state"]
    assert _layer("jobs.console.views") == "web"
    assert _layer("jobs.registry") == "core"
    assert _layer("worker.schedulers.heap") == "worker"


def test_imports_go_down_the_layers_only() -> None:
    upward = sorted(
        f"{module} ({_layer(module)}) imports {target} ({_layer(target)})"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(target) != _layer(module) and _layer(target) not in MAY_IMPORT[_layer(module)]
    )
    assert upward == []


def test_no_import_cycles() -> None:
    # Package __init__ modules import nothing that imports them back, so every edge counts.
    try:
        graphlib.TopologicalSorter(GRAPH).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


def test_the_state_machine_names_no_subscriber() -> None:
    reachable: set[str] = set()
    pending = ["jobs.state"]
    while pending:
        for target in GRAPH[pending.pop()] - reachable:
            reachable.add(target)
            pending.append(target)
    assert {
        module for module in reachable if any(module.startswith(s) for s in SUBSCRIBERS)
    } == set()


def test_only_the_core_runs_named_sql() -> None:
    # Everything else calls the core's named functions (jobs.state, jobs.stats).
    callers = {module for module, targets in GRAPH.items() if "jobs.sql" in targets}
    assert callers and {module for module in callers if _layer(module) != "core"} == set()
