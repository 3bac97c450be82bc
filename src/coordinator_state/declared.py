"""Data types declared once: each field says what it is, and the journal, the codec and the snapshot follow.

A group type's data (and its members) is a slotted dataclass whose every field is made by one of the helpers
below. From that one declaration, `Declaration` derives:

- the undo journal's before-image (journal.py): every field but the `identity` and `attached` ones, read at
  once when an event starts (containers by reference: their contents are journaled change by change) and
  written back by an undo;
- the stored state (the state codec): every `identity` and `stored` field under its key, through its
  encoder and decoder; a field a later format added says what a state of an older format loads with
  (`missing`);
- the snapshot (PROTOCOL.md section 4): the fields with a `shown` name, in declaration order, each through
  its view (which may read the owner, e.g. a member's subscription is its metadata for the group's protocol).

So a new field is journaled, stored and shown, or not, where it is declared, and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, dataclass_transform

_SPEC = "declared"


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    journaled: bool
    key: str | None = None  # stored under this key; None: not stored
    encode: Callable[[Any], Any] | None = None  # value -> JSON value (None: as is)
    decode: Callable[[Any], Any] | None = None  # JSON value -> value (None: as is)
    missing: Callable[[Mapping[str, Any]], Any] | None = None  # the value when an older format lacks the key
    shown: str | None = None  # the snapshot's name for it; None: not shown
    view: Callable[[Any, Any], Any] | None = None  # (value, owner) -> the snapshot's value (None: as is)


def _field(spec: FieldSpec, default: Any, factory: Callable[[], Any] | None, init: bool = True) -> Any:
    metadata = {_SPEC: spec}
    if factory is not None:
        return dataclasses.field(default_factory=factory, init=init, metadata=metadata)
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, init=init, metadata=metadata)
    return dataclasses.field(init=init, metadata=metadata)


def identity(key: str | None, *, shown: str | None = None, default: Any = dataclasses.MISSING,
             encode: Callable[[Any], Any] | None = None, decode: Callable[[Any], Any] | None = None) -> Any:
    """Set once, when the object is made, never changed: stored (under `key`), not journaled."""
    return _field(FieldSpec(False, key, encode, decode, shown=shown), default, None)


def stored(key: str, *, default: Any = dataclasses.MISSING, factory: Callable[[], Any] | None = None,
           encode: Callable[[Any], Any] | None = None, decode: Callable[[Any], Any] | None = None,
           missing: Callable[[Mapping[str, Any]], Any] | None = None, shown: str | None = None,
           view: Callable[[Any, Any], Any] | None = None) -> Any:
    """Part of the state: journaled and stored under `key`."""
    return _field(FieldSpec(True, key, encode, decode, missing, shown, view), default, factory)


def derived(*, default: Any = dataclasses.MISSING, factory: Callable[[], Any] | None = None) -> Any:
    """Kept up to date from the stored fields, or one event's bookkeeping: journaled, not stored (rebuilt
    when the state is decoded)."""
    return _field(FieldSpec(True), default, factory, init=False)


def attached(*, default: Any = dataclasses.MISSING, init: bool = True) -> Any:
    """Given to the object (its configuration, its journal, its place in an order): neither stored nor
    journaled."""
    return _field(FieldSpec(False), default, None, init)


_T = TypeVar("_T")


@dataclass_transform(field_specifiers=(identity, stored, derived, attached))
def declared(*, kw_only: bool = False, eq: bool = True) -> Callable[[type[_T]], type[_T]]:
    """The class decorator of a declared type: a slotted dataclass (attribute reads and method calls on the
    engine's data are its most frequent operations, and CPython specialises them for slots)."""
    return dataclasses.dataclass(slots=True, kw_only=kw_only, eq=eq)


def _compiled(source: str, name: str, namespace: dict[str, Any] | None = None) -> Any:
    namespace = {} if namespace is None else namespace
    exec(source, namespace)  # source made below from field names, repr()s of keys and names of `namespace`
    return namespace[name]


class Declaration:
    """What a declared dataclass's fields say, turned into the operations the engine needs."""

    def __init__(self, cls: type) -> None:
        specs: list[tuple[str, FieldSpec]] = []
        for f in dataclasses.fields(cls):
            spec = f.metadata.get(_SPEC)
            if not isinstance(spec, FieldSpec):
                raise TypeError(f"{cls.__name__}.{f.name} is not declared with identity/stored/derived/attached")
            specs.append((f.name, spec))
        self.name = cls.__name__
        self.journaled = tuple(name for name, spec in specs if spec.journaled)
        fields = "".join(f"obj.{name}, " for name in self.journaled)
        # Generated, as dataclasses generate __init__: a tuple built by bytecode that reads slots costs a fraction
        # of operator.attrgetter's generic lookups, and a before-image is taken at every event.
        self.before_image: Callable[[Any], tuple[Any, ...]] = _compiled(
            f"def before_image(obj):\n    return ({fields})\n", "before_image")
        """Every journaled field's value, in declaration order."""
        self.restore: Callable[[Any, tuple[Any, ...]], None] = _compiled(
            f"def restore(obj, image):\n    ({fields}) = image\n", "restore")
        """Sets every journaled field back to its value in a before-image."""
        self.stored = tuple((name, spec.key, spec) for name, spec in specs if spec.key is not None)
        self.shown = tuple((name, spec.shown, spec.view) for name, spec in specs if spec.shown is not None)
        # Generated too: a group's state is read and written at every call of the Spark job's step.
        coders: dict[str, Any] = {"cls": cls}
        encoded, loaded = [], []
        for name, key, spec in self.stored:
            value, stored_value = f"obj.{name}", f"data[{key!r}]"
            if spec.encode is not None:
                coders[f"encode_{name}"] = spec.encode
                value = f"encode_{name}({value})"
            if spec.decode is not None:
                coders[f"decode_{name}"] = spec.decode
                stored_value = f"decode_{name}({stored_value})"
            if spec.missing is not None:
                coders[f"missing_{name}"] = spec.missing
                stored_value = f"({stored_value} if {key!r} in data else missing_{name}(data))"
            encoded.append(f"{key!r}: {value}, ")
            loaded.append(f"{name}={stored_value}, ")
        self.encode: Callable[[Any], dict[str, Any]] = _compiled(
            f"def encode(obj):\n    return {{{''.join(encoded)}}}\n", "encode", dict(coders))
        """Every stored field under its key, encoded, in declaration order."""
        self._load: Callable[[Mapping[str, Any], dict[str, Any]], Any] = _compiled(
            f"def load(data, given):\n    return cls(**given, {''.join(loaded)})\n", "load", dict(coders))
        self._required = tuple(key for _, key, spec in self.stored if spec.missing is None)

    def load(self, data: Mapping[str, Any], **given: Any) -> Any:
        """An object made from what `encode` wrote (in any format so far: a key an older format lacks takes the
        field's `missing` value), and the other constructor arguments `given`."""
        try:
            return self._load(data, given)
        except KeyError:
            absent = next((key for key in self._required if key not in data), None)
            if absent is None:
                raise  # from a field's decoder
            raise KeyError(f"{self.name} state has no {absent!r}") from None

    def snapshot(self, obj: Any, owner: Any) -> dict[str, Any]:
        """The shown fields under their snapshot names, in declaration order."""
        return {shown: getattr(obj, name) if view is None else view(getattr(obj, name), owner)
                for name, shown, view in self.shown}
