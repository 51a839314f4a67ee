"""Frozen records for the eval path: what `@dataclasses.dataclass(frozen=True)`
gives (keyword or positional construction, defaults, `__post_init__`,
equality, hash, repr, FrozenInstanceError on assignment), in slotted classes,
without importing dataclasses (and inspect) or generating code at import."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    _Class = TypeVar("_Class", bound=type)
else:
    def dataclass_transform(**kwargs: object) -> object:
        return lambda function: function


_MISSING = object()


def _frozen(record: object, name: str) -> None:
    # Only a misuse pays for dataclasses: its error is the one callers catch.
    import dataclasses

    raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}' of {type(record).__name__}")


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    fields, defaults = self._fields_, self._defaults_
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, {len(args)} given")
    values = dict(zip(fields, args))
    for name, value in kwargs.items():
        if name not in fields:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{name}'")
        if name in values:
            raise TypeError(f"{type(self).__name__}() got multiple values for argument '{name}'")
        values[name] = value
    for name in fields:
        value = values.get(name, defaults.get(name, _MISSING))
        if value is _MISSING:
            raise TypeError(f"{type(self).__name__}() missing argument '{name}'")
        object.__setattr__(self, name, value)
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in self._fields_)


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields_)
    return f"{type(self).__name__}({shown})"


def _setattr(self: Any, name: str, value: object) -> None:
    _frozen(self, name)


def _delattr(self: Any, name: str) -> None:
    _frozen(self, name)


@dataclass_transform(frozen_default=True)
def frozen(cls: _Class) -> _Class:
    """Make `cls`, whose annotated class attributes are its fields (in
    order, a value being the default), a frozen slotted record."""
    namespace = dict(cls.__dict__)
    fields = tuple(namespace.get("__annotations__", {}))
    defaults = {name: namespace.pop(name) for name in fields if name in namespace}
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace.update(__slots__=fields, _fields_=fields, _defaults_=defaults, __init__=_init, __eq__=_eq,
                     __hash__=_hash, __repr__=_repr, __setattr__=_setattr, __delattr__=_delattr)
    made: _Class = type(cls)(cls.__name__, cls.__bases__, namespace)
    return made
