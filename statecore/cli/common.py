"""What every ``statecore`` subcommand shares: exit codes, flag checks, loading user code.

The exit codes (one meaning each, see `statecore.cli`), `UsageError`, the
checks that refuse a bad flag before any work, and the loading of a user's
``module:object`` target or adapter, whose own failures become one-line
`TargetError` messages rather than tracebacks.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypeVar

from ..errors import StatecoreError
from ..registry import Target, TargetError, bundled, is_user_target, resolve
from ..system import System

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INCOMPLETE = 4
EXIT_INTERRUPTED = 130

REPORT_HINT = (
    "statecore: this is a bug in statecore, not in the code under test; please report it "
    "with the command line and the traceback above"
)


T = TypeVar("T")


class UsageError(StatecoreError):
    """A flag or argument the command cannot run with."""


# -- validating flags before any work --------------------------------------------


def require_positive_int(value: int | None, flag: str, what: str, example: int) -> None:
    if value is not None and value < 1:
        raise UsageError(
            f"{flag} {value}: must be a positive number of {what} (e.g. {flag} {example})"
        )


def require_positive_float(value: float | None, flag: str, what: str, example: int) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(
            f"{flag} {value}: must be a positive, finite number of {what} (e.g. {flag} {example})"
        )


def require_writable_dir(path: Path | None, flag: str) -> None:
    """Refuse an output directory that cannot be written, before the work whose result it keeps.

    Nothing is created here: a missing directory is made only when there is
    something to write, but its nearest existing ancestor must be a writable
    directory.
    """
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"{flag} {path}: is a file, not a directory; give a directory (created if missing)"
        )
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(
            f"{flag} {path}: {ancestor} is a file, so the directory cannot be created; "
            f"give another directory"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag} {path}: {ancestor} is not writable; give a directory you can write to"
        )
    try:
        _probe_write(path, ancestor)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc}); give a directory you "
            f"can write to"
        ) from None


def _probe_write(path: Path, ancestor: Path) -> None:
    """Write in `path` (or make its first missing part) and undo it: what access() misses."""
    if ancestor == path:
        with tempfile.TemporaryFile(dir=path):
            return
    first = path
    while first.parent != ancestor:
        first = first.parent
    first.mkdir()
    first.rmdir()


def output_error(flag: str, exc: OSError) -> UsageError:
    return UsageError(f"{flag}: cannot write {exc.filename or ''}: {exc.strerror or exc}")


# -- loading user targets --------------------------------------------------------


def resolve_target(name: str) -> tuple[str, System, Target | None]:
    """`resolve`, with a user module's own failures turned into one-line errors."""
    bundled()  # outside the guard: the bundled models failing to import is statecore's bug
    return guard_user_code(name, lambda: resolve(name))


def guard_user_code(name: str, load: Callable[[], T]) -> T:
    """Run `load` for target `name`; what user code raises becomes a `TargetError`.

    A bundled target that fails to load is a bug in statecore, so only
    ``module:object`` targets are guarded.
    """
    if not is_user_target(name):
        return load()
    try:
        return load()
    except StatecoreError:
        raise
    except SyntaxError as exc:
        raise syntax_error(f"target {name!r}", exc) from None
    except SystemExit as exc:
        raise TargetError(
            f"target {name!r}: importing it called sys.exit({exc.code!r}); move script code "
            f"under `if __name__ == '__main__':`"
        ) from None
    except Exception as exc:
        raise TargetError(_user_failure(name, exc)) from exc


def syntax_error(what: str, exc: SyntaxError) -> TargetError:
    """The one-line error for a user module (`what`: ``target 'x'``) that does not parse."""
    where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
    return TargetError(f"{what}: {where}: syntax error: {exc.msg}; fix the module")


def _user_failure(name: str, exc: Exception) -> str:
    """What went wrong in the user's module or factory behind `name`, in one line."""
    module_name, _, attr = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:  # a failed import leaves nothing behind
        return (
            f"target {name!r}: importing {module_name!r} raised {exception_text(exc)}"
            f"{user_frame(exc)}; fix the module"
        )
    factory = _attribute(module, attr)
    needed = _required_parameters(factory)
    if needed:
        return (
            f"target {name!r}: {attr}() needs arguments ({', '.join(needed)}); give a System, "
            f"a Machine, or a function taking no arguments that returns one"
        )
    return (
        f"target {name!r}: calling {attr}() raised {exception_text(exc)}{user_frame(exc)}; "
        f"fix the function"
    )


def _attribute(module: object, path: str) -> object:
    obj: object = module
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _required_parameters(obj: object) -> list[str]:
    if not callable(obj):
        return []
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in variadic
    ]


def exception_text(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def user_frame(exc: BaseException) -> str:
    """`` at FILE, line N``: the innermost frame outside statecore and importlib."""
    here = Path(__file__).resolve().parents[1]  # the statecore package
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and here not in Path(f.filename).resolve().parents
    ]
    if not frames:
        return ""
    return f" at {frames[-1].filename}, line {frames[-1].lineno}"


def file_stem(name: str) -> str:
    """`name` as part of a file name: ``mypkg.mod:SYSTEM`` becomes ``mypkg.mod_SYSTEM``.

    ``:`` is not allowed in a Windows file name nor in some CI artifact stores;
    the trace header keeps the target's real name.
    """
    return re.sub(r"[^\w.-]", "_", name)


def resolve_adapter_guarded(target: str, adapter: str) -> tuple[System, Callable[[], Any], Any]:
    """`resolve_adapter`, with the user's own adapter module failing in one line."""
    from ..registry import is_user_adapter, resolve_adapter

    if not is_user_adapter(adapter):
        return resolve_adapter(target, adapter)
    try:
        return resolve_adapter(target, adapter)
    except StatecoreError:
        raise
    except SyntaxError as exc:
        raise syntax_error(f"adapter {adapter!r}", exc) from None
    except Exception as exc:
        raise TargetError(
            f"adapter {adapter!r}: importing it raised {exception_text(exc)}"
            f"{user_frame(exc)}; fix the module"
        ) from exc


def never_taken(name: str, untaken: Mapping[str, str]) -> str:
    """One coverage line: an untaken transition, with its reason if one is declared."""
    if name in untaken:
        return f"not taken by design: {name} ({untaken[name]})"
    return f"never taken: {name}"


# -- terminal helpers ----------------------------------------------------------


def colour(text: str, code: str, stream: TextIO) -> str:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"
