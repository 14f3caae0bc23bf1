"""The layout of `statecore/`: no import cycle, and no module too long to read.

Imports are read from the source (every ``import`` statement, at module level
or inside a function, except under ``if TYPE_CHECKING:``), so an import
deferred into a function to dodge a cycle still counts as the cycle it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "statecore"

MAX_LINES = 600

# Modules allowed over MAX_LINES, each with why: what is left to split. Empty:
# every module is under the limit. A module that grows past it must be split,
# or listed here with the reason (and removed again once split: an entry no
# longer needed fails too, so this list always says what is left).
OVER_MAX_LINES: dict[str, str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The statecore modules `name` (at `path`) imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), str(path))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            # `from . import x` imports the module x when there is one, else a name.
            targets = [f"{origin}.{alias.name}" for alias in node.names] + [origin]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
                if isinstance(node, ast.ImportFrom):
                    break  # the most specific module the statement names
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_statecore_modules() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_over_the_line_limit_but_the_listed_ones() -> None:
    over = {
        str(path.relative_to(PACKAGE)): _lines(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if _lines(path) > MAX_LINES
    }
    unlisted = {name: n for name, n in over.items() if name not in OVER_MAX_LINES}
    assert unlisted == {}, f"modules over {MAX_LINES} lines: split them"
    done = sorted(set(OVER_MAX_LINES) - set(over))
    assert done == [], f"no longer over {MAX_LINES} lines: remove from OVER_MAX_LINES"


# The layers, lowest first: a module may import its own layer and those below.
# The core is the package's top level (definition, semantics, runtime, system,
# transaction, properties, registry, adapter); `__main__` is the command's
# entry point and may import the CLI.
LAYERS = ("core", "traces", "check", "fuzzing", "render", "interop", "cli")
ENTRY_POINTS = {"statecore.__main__"}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "core"


def test_each_layer_imports_only_its_own_and_lower_layers() -> None:
    modules = _modules()
    upward = sorted(
        f"{name} ({_layer(name)}) imports {target} ({_layer(target)})"
        for name, path in modules.items()
        if name not in ENTRY_POINTS and not name.startswith(("statecore.models", "statecore.spec"))
        for target in _imports(name, path, modules)
        if not target.startswith(("statecore.models", "statecore.spec"))
        and LAYERS.index(_layer(target)) > LAYERS.index(_layer(name))
    )
    assert upward == []


def test_the_layers_are_the_packages() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS[1:])


def test_the_flat_layout_module_paths_still_import_with_a_warning() -> None:
    import importlib
    import sys
    import warnings

    from statecore.moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert module.__name__ == new and module.__spec__.name == new
        assert [str(w.message) for w in caught] == [
            f"{old} moved to {new}; import it from there"
        ], old
    assert not set(MOVED) & set(_modules()), "an old path that is also a module"


def _model_modules() -> dict[str, Path]:
    """The modules of models/ and spec/ under their installed names."""
    found: dict[str, Path] = {}
    for folder, package in (("models", "statecore.models"), ("spec", "statecore.spec")):
        base = PACKAGE.parent / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
            found[name] = path
    return found


def test_no_import_cycle_among_models_and_spec() -> None:
    modules = _model_modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_no_model_or_spec_module_over_the_line_limit() -> None:
    over = {
        name: _lines(path) for name, path in _model_modules().items() if _lines(path) > MAX_LINES
    }
    assert over == {}
