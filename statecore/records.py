"""Typed globals: a system's shared variables declared as one frozen record type.

A model declares its globals as a ``NamedTuple`` (or frozen dataclass) whose
fields all have defaults::

    class Shared(NamedTuple):
        queue: Annotated[tuple[Task, ...], "the save thread's FIFO"] = ()
        received: tuple[Put, ...] = ()

    System("chunks", ..., globals=Shared)

Actions then read ``tx.g.queue`` and write ``tx.put(queue=...)``; properties
read ``view.g.received``. Field names and types are checked by mypy, not
looked up by string at exploration time. Each field is still one global, in
field order, so a read is logged per field and the successor memo learns
exactly what an action depends on.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from .errors import SystemDefinitionError


@dataclasses.dataclass(frozen=True)
class Global:
    """A system-level variable, e.g. a FIFO queue kept as a tuple."""

    name: str
    default: Hashable
    doc: str = ""


class _Reads(Protocol):
    def value_at(self, index: int) -> Any: ...


def record_globals(record: type, where: str) -> tuple[Global, ...]:
    """The globals a record type declares: one per field, in order, with its default."""
    if dataclasses.is_dataclass(record):
        names = [f.name for f in dataclasses.fields(record)]
    elif issubclass(record, tuple) and hasattr(record, "_fields"):
        names = list(record._fields)
    else:
        raise SystemDefinitionError(
            f"{where}: globals={record.__name__} is neither a NamedTuple nor a dataclass; "
            "declare the globals as one of them"
        )
    try:
        defaults = record()
    except TypeError:
        raise SystemDefinitionError(
            f"{where}: every field of globals record {record.__name__} needs a default "
            "(the initial value)"
        ) from None
    docs = _field_docs(record)
    return tuple(Global(n, getattr(defaults, n), docs.get(n, "")) for n in names)


def _field_docs(record: type) -> dict[str, str]:
    """Docs given as ``Annotated[type, "doc"]`` on the record's fields."""
    try:
        hints = typing.get_type_hints(record, include_extras=True)
    except Exception:  # an annotation that does not resolve: no docs, not an error
        return {}
    docs = {}
    for name, hint in hints.items():
        texts = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, str)]
        if texts:
            docs[name] = " ".join(texts)
    return docs


def reader(record: type, names: tuple[str, ...], owner: str) -> Callable[[_Reads], Any]:
    """A class whose instance reads the record's fields through ``source.value_at(i)``.

    It stands in for the record type (so ``tx.g.queue`` type-checks as the
    field's type) while each attribute read goes through the transaction's
    read log. Whatever looks at the record as a whole (``==``, ``hash``,
    iterating, ``isinstance``, ``_asdict()``) reads every field and gets the
    record itself: a predicate or action sees the same record either way,
    and the log says it read everything; so does every other special method
    the record has (``bool``, ``str``, ``+``, ...), and a tuple record's
    reader is a sequence to ``match``. Only ``type(tx.g)`` tells it from the
    record: test the record type with ``isinstance``.
    """

    def field_reader(index: int) -> property:
        return property(lambda self: self._source.value_at(index))

    def whole(self: Any) -> Any:
        source = self._source
        return make_record(record, tuple(source.value_at(i) for i in range(len(names))))

    def setattr_(self: object, name: str, value: object) -> None:
        raise AttributeError(
            f"{owner}: globals are written with tx.put({name}=...), not by assignment"
        )

    def getattr_(self: object, name: str) -> Any:
        if hasattr(record, name):  # a method or attribute of the record type: `_asdict`, ...
            return getattr(whole(self), name)
        raise AttributeError(
            f"{owner}: {record.__name__} has no field {name!r}; fields are {list(names)}"
        )

    namespace: dict[str, Any] = {name: field_reader(i) for i, name in enumerate(names)}
    namespace.update(
        __slots__=(), __setattr__=setattr_, __getattr__=getattr_, __doc__=record.__doc__
    )
    for dunder in _whole_methods(record):
        namespace[dunder] = _on_whole(dunder, whole)
    namespace["__class__"] = property(lambda self: record)  # isinstance(tx.g, Record)
    if hasattr(record, "__dataclass_fields__"):  # dataclasses.is_dataclass, fields, replace
        namespace["__dataclass_fields__"] = record.__dataclass_fields__
    view_class = type(f"{record.__name__}Reads", (_Source,), namespace)
    if issubclass(record, tuple):  # a sequence to `match` (``case (queue, _):``), as the record
        collections.abc.Sequence.register(view_class)
    return view_class


def _whole_methods(record: type) -> list[str]:
    """The special methods `record` has of its own (or a base's but `object`'s): ``==``,
    ``hash``, ordering, ``len``, iterating, ``bool``, ``str``, ``+``, ...; each, on the
    reader, is done on the record itself, every field read."""
    names = []
    for name in dir(record):
        if not (name.startswith("__") and name.endswith("__")) or name in _OWN:
            continue
        method = getattr(record, name, None)
        if callable(method) and method is not getattr(object, name, None):
            names.append(name)
    return names


# Special methods the reader keeps its own: making, attribute access, pickling, its type.
_OWN = frozenset(
    {
        "__class__",
        "__class_getitem__",
        "__delattr__",
        "__dir__",
        "__getattr__",
        "__getattribute__",
        "__getnewargs__",
        "__getnewargs_ex__",
        "__getstate__",
        "__init__",
        "__init_subclass__",
        "__new__",
        "__reduce__",
        "__reduce_ex__",
        "__setattr__",
        "__setstate__",
        "__sizeof__",
        "__subclasshook__",
    }
)


def _on_whole(name: str, whole: Callable[[Any], Any]) -> Callable[..., Any]:
    def method(self: Any, *args: Any) -> Any:
        return getattr(whole(self), name)(*args)

    method.__name__ = name
    return method


class _Source:
    __slots__ = ("_source",)

    def __init__(self, source: _Reads) -> None:
        object.__setattr__(self, "_source", source)


def make_record(record: type, values: tuple[Hashable, ...]) -> Any:
    """An instance of `record` holding `values` in field order."""
    make = getattr(record, "_make", None)
    return make(values) if make is not None else record(*values)
