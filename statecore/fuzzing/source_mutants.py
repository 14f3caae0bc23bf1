"""Single-point mutants of an implementation's functions, made from its source's AST.

`statecore.check.mutation` mutates a *model*; this module mutates the *code* a
binding drives, so ``statecore mutate`` can measure how much of it a fuzz run
pins down. Each mutant changes one expression or statement of one of the
named functions:

* ``negate-condition`` - the test of an ``if``, ``while``, ``assert`` or
  conditional expression becomes ``not (test)``;
* ``drop-not`` - ``not x`` becomes ``x``;
* ``swap-and-or`` - ``and`` becomes ``or`` and back;
* ``swap-is`` / ``swap-in`` - ``is`` becomes ``is not``, ``in`` becomes ``not in``, and back;
* ``swap-comparison`` - ``<`` becomes ``<=``, ``>`` becomes ``>=``, ``==`` becomes ``!=``, and back;
* ``flip-constant`` - ``True`` becomes ``False`` and back;
* ``one-to-zero`` - ``x + 1`` (``- 1``, ``+= 1``, ``-= 1``) adds or takes 0 instead;
* ``delete-statement`` - a simple statement (a call, an assignment, a
  ``return``, ``raise``, ``del``, ``assert``, ``break`` or ``continue``)
  becomes ``pass``.

As for model mutants, an id names the function, the kind and the line's code,
not its number (``swap-and-or RequestStateView.resolve: if namespace in ...``;
a second one alike gets `` #2``), so a declaration that a mutant is
equivalent survives edits that move lines. `mutated_code` compiles the module
with one mutant applied, keeping the file's name and line numbers; nothing is
written to disk.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from ..check.mutation import where
from ..errors import StatecoreError

__all__ = ["SOURCE_KINDS", "SourceMutant", "UnknownFunction", "mutated_code", "source_mutants"]

SOURCE_KINDS = (
    "negate-condition",
    "drop-not",
    "swap-and-or",
    "swap-is",
    "swap-in",
    "swap-comparison",
    "flip-constant",
    "one-to-zero",
    "delete-statement",
)

_SWAPS: dict[type[ast.cmpop], tuple[str, type[ast.cmpop]]] = {
    ast.Is: ("swap-is", ast.IsNot),
    ast.IsNot: ("swap-is", ast.Is),
    ast.In: ("swap-in", ast.NotIn),
    ast.NotIn: ("swap-in", ast.In),
    ast.Lt: ("swap-comparison", ast.LtE),
    ast.LtE: ("swap-comparison", ast.Lt),
    ast.Gt: ("swap-comparison", ast.GtE),
    ast.GtE: ("swap-comparison", ast.Gt),
    ast.Eq: ("swap-comparison", ast.NotEq),
    ast.NotEq: ("swap-comparison", ast.Eq),
}

_DELETABLE = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Return,
    ast.Raise,
    ast.Delete,
    ast.Assert,
    ast.Break,
    ast.Continue,
)

_Make = Callable[[ast.AST], ast.AST]


class UnknownFunction(StatecoreError):
    """A function to mutate that the module does not define."""


@dataclass(frozen=True)
class SourceMutant:
    """One single-point change to a function: `id` is stable, `code` -> `changed` is the change."""

    id: str
    kind: str
    function: str
    filename: str
    line: int
    code: str
    changed: str

    @property
    def where(self) -> str:
        """``path:line``, the path relative to the working directory when it can be."""
        return where(self.filename, self.line)

    def __str__(self) -> str:
        return f"{self.kind} at {self.where}: {self.code} -> {self.changed}"


def source_mutants(filename: str, functions: Sequence[str]) -> tuple[SourceMutant, ...]:
    """Every single-point mutant of `functions` (``name`` or ``Class.name``) in `filename`.

    `UnknownFunction` if a name matches no function of the module.
    """
    source = Path(filename).read_text(encoding="utf-8")
    return tuple(
        m for m, _, _ in _mutants(ast.parse(source, filename), source, filename, functions)
    )


def mutated_code(filename: str, functions: Sequence[str], mutant_id: str) -> CodeType:
    """The module in `filename` compiled with the mutant `mutant_id` applied."""
    source = Path(filename).read_text(encoding="utf-8")
    tree = ast.parse(source, filename)
    found = [
        (n, make) for m, n, make in _mutants(tree, source, filename, functions) if m.id == mutant_id
    ]
    if not found:
        raise StatecoreError(f"{filename} has no mutant {mutant_id!r}")
    ((target, make),) = found
    replacement = ast.copy_location(make(copy.deepcopy(target)), target)
    _Replace(target, replacement).visit(tree)
    return compile(ast.fix_missing_locations(tree), filename, "exec", dont_inherit=True)


def _mutants(
    tree: ast.Module, source: str, filename: str, functions: Sequence[str]
) -> list[tuple[SourceMutant, ast.AST, _Make]]:
    """Each mutant with the node it replaces and how it builds the replacement."""
    lines = source.splitlines()
    found: list[tuple[SourceMutant, ast.AST, _Make]] = []
    seen: dict[str, int] = {}
    for qualname, func in _functions(tree, functions):
        for kind, node, make in _points(func):
            line: int = getattr(node, "lineno", 0)
            code = lines[line - 1].strip()
            base = f"{kind} {qualname}: {code}"
            count = seen[base] = seen.get(base, 0) + 1
            changed = _changed_line(lines, node, make(copy.deepcopy(node)))
            mutant_id = base if count == 1 else f"{base} #{count}"
            mutant = SourceMutant(mutant_id, kind, qualname, filename, line, code, changed)
            found.append((mutant, node, make))
    return found


# -- finding the functions and their mutation points --------------------------------------


def _functions(tree: ast.Module, names: Sequence[str]) -> list[tuple[str, ast.AST]]:
    """The functions named (bare names match methods of any class), in source order."""
    defined = list(_defs(tree.body, ""))
    missing = [n for n in names if not any(q == n or q.rsplit(".", 1)[-1] == n for q, _ in defined)]
    if missing:
        known = ", ".join(sorted({q for q, _ in defined}))
        raise UnknownFunction(
            f"no function {', '.join(map(repr, missing))} in the module; it defines: {known}"
        )
    return [(q, f) for q, f in defined if any(q == n or q.rsplit(".", 1)[-1] == n for n in names)]


def _defs(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.AST]]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _defs(node.body, f"{prefix}{node.name}.")


def _points(func: ast.AST) -> Iterator[tuple[str, ast.AST, _Make]]:
    """``(kind, node, make)`` per mutation point of `func`'s body; `make` builds the new node."""
    body: list[ast.stmt] = getattr(func, "body", [])
    found = [p for stmt in body for node in ast.walk(stmt) for p in _node_points(node)]
    found.sort(key=lambda p: (getattr(p[1], "lineno", 0), getattr(p[1], "col_offset", 0)))
    yield from found


def _node_points(node: ast.AST) -> Iterator[tuple[str, ast.AST, _Make]]:
    if isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)):
        test = node.test
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            yield "negate-condition", test, _negate
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop-not", node, lambda n: n.operand  # type: ignore[attr-defined]
    if isinstance(node, ast.BoolOp):
        yield "swap-and-or", node, _swap_bool
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _SWAPS:
                yield _SWAPS[type(op)][0], node, _swap_compare(i)
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "flip-constant", node, lambda n: ast.Constant(not n.value)  # type: ignore[attr-defined]
    one = _added_one(node)
    if one is not None:
        yield "one-to-zero", one, lambda n: ast.Constant(0)
    if isinstance(node, _DELETABLE) and not _docstring(node):
        yield "delete-statement", node, lambda n: ast.Pass()


def _negate(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.expr)
    return ast.UnaryOp(ast.Not(), node)


def _swap_bool(node: ast.AST) -> ast.AST:
    assert isinstance(node, ast.BoolOp)
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return node


def _swap_compare(i: int) -> _Make:
    def make(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.Compare)
        node.ops[i] = _SWAPS[type(node.ops[i])][1]()
        return node

    return make


def _added_one(node: ast.AST) -> ast.Constant | None:
    """The constant ``1`` of ``x + 1``, ``x - 1``, ``x += 1`` or ``x -= 1``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        right = node.right
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        right = node.value
    else:
        return None
    if isinstance(right, ast.Constant) and type(right.value) is int and right.value == 1:
        return right
    return None


def _docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _changed_line(lines: list[str], node: ast.AST, new: ast.AST) -> str:
    """The node's first line with the node's text replaced by `new`'s, stripped."""
    start: int = getattr(node, "lineno", 0)
    end: int | None = getattr(node, "end_lineno", None)
    text = ast.unparse(new)
    if start != end or end is None:
        return text.splitlines()[0] if text else "pass"
    raw = lines[start - 1].encode("utf-8")
    col: int = getattr(node, "col_offset", 0)
    end_col: int = getattr(node, "end_col_offset", len(raw))
    return (raw[:col].decode() + text + raw[end_col:].decode()).strip()


class _Replace(ast.NodeTransformer):
    """Put `replacement` where `target` is."""

    def __init__(self, target: ast.AST, replacement: ast.AST) -> None:
        self.target = target
        self.replacement = replacement

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.replacement
        visited: ast.AST = super().visit(node)
        return visited
