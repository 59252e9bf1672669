"""Frozen records: what ``@dataclass(frozen=True)`` gives (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
no assignment), built with one ``exec`` per class instead of one per method.

Why not dataclasses: on Python 3.11 a frozen dataclass costs about 1 ms to create (six generated methods,
each compiled apart), and `cost4d step` creates about 20 of them before it prints anything: a fifth of the
start-up the command adds to typer's own (issue 14; benchmarks/cold_start.py). A record is about 4x cheaper
to create and as fast to build instances of. What it keeps of dataclasses' behaviour: fields are the class's
annotations in order (a base record's first), with defaults or ``field(default=..., default_factory=...,
repr=..., compare=...)``; a mutable default (list, dict, set) is refused; assignment raises
``dataclasses.FrozenInstanceError``; equality and hash are over the compared fields, for the same class only.
``replace``, ``names`` and ``asdict`` stand in for dataclasses' ``replace``, ``fields`` and ``asdict``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

_NO_DEFAULT = object()


class Field:
    """A field's options (what ``field(...)`` returns, as dataclasses' does)."""

    __slots__ = ("default", "default_factory", "repr", "compare")

    def __init__(self, default=_NO_DEFAULT, default_factory=None, repr=True, compare=True):  # noqa: A002
        if default is not _NO_DEFAULT and default_factory is not None:
            raise ValueError("give a field a default or a default_factory, not both")
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare


def field(*, default=_NO_DEFAULT, default_factory=None, repr=True, compare=True) -> Field:  # noqa: A002
    """A field with options, as ``dataclasses.field``."""
    return Field(default, default_factory, repr, compare)


def record(cls):
    """Make ``cls`` a frozen record (see the module's docstring)."""
    options = dict(getattr(cls, "__record_fields__", {}))  # a base record's fields come first
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name, _NO_DEFAULT)
        if isinstance(value, (list, dict, set)):
            raise ValueError(f"{cls.__name__}.{name}: a mutable default is shared; use field(default_factory=...)")
        if isinstance(value, Field):  # the class keeps a plain default as its attribute, as dataclasses do
            delattr(cls, name) if value.default is _NO_DEFAULT else setattr(cls, name, value.default)
        options[name] = value if isinstance(value, Field) else Field(default=value)
    cls.__record_fields__ = options
    namespace = {"_names": tuple(options), "_repr": tuple(n for n, f in options.items() if f.repr),
                 "FrozenInstanceError": FrozenInstanceError}
    exec(_source(options, namespace), namespace)  # noqa: S102 - our own text, built from identifiers
    for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        function = namespace[method]
        function.__qualname__ = f"{cls.__qualname__}.{method}"
        setattr(cls, method, function)
    return cls


def _source(options: dict, namespace: dict) -> str:
    """The methods' text; defaults and factories go into ``namespace`` as ``_d_<name>`` / ``_f_<name>``."""
    params, lines, seen_default = [], [], False
    for name, option in options.items():
        if not name.isidentifier():
            raise ValueError(f"field {name!r} is not a name")
        if option.default_factory is not None:
            namespace[f"_f_{name}"] = option.default_factory
            params.append(f"{name}=_NOTHING")
            lines.append(f"    _s['{name}'] = _f_{name}() if {name} is _NOTHING else {name}")
        else:
            if option.default is not _NO_DEFAULT:
                namespace[f"_d_{name}"] = option.default
                params.append(f"{name}=_d_{name}")
            elif seen_default:
                raise TypeError(f"non-default field {name!r} follows a field with a default")
            else:
                params.append(name)
            lines.append(f"    _s['{name}'] = {name}")
        seen_default = seen_default or option.default is not _NO_DEFAULT or option.default_factory is not None
    namespace["_NOTHING"] = _NO_DEFAULT
    compared = [name for name, option in options.items() if option.compare]
    mine = "(" + "".join(f"self.{n}, " for n in compared) + ")"
    theirs = "(" + "".join(f"other.{n}, " for n in compared) + ")"
    return (f"def __init__(self, {', '.join(params)}):\n    _s = self.__dict__\n" + "\n".join(lines) + "\n"
            "def __repr__(self):\n"
            "    return self.__class__.__qualname__ + '(' + ', '.join(n + '=' + repr(getattr(self, n)) for n in _repr)"
            " + ')'\n"
            f"def __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return {mine} == {theirs}\n"
            "    return NotImplemented\n"
            f"def __hash__(self):\n    return hash({mine})\n"
            "def __setattr__(self, name, value):\n    raise FrozenInstanceError(f'cannot assign to field {name!r}')\n"
            "def __delattr__(self, name):\n    raise FrozenInstanceError(f'cannot delete field {name!r}')\n")


def names(record_or_class) -> tuple:
    """The field names of a record (or record class), in order."""
    return tuple(record_or_class.__record_fields__)


def replace(item, **changes):
    """A copy of the record ``item`` with ``changes`` (as ``dataclasses.replace``); an unknown name is a TypeError."""
    unknown = set(changes) - set(item.__record_fields__)
    if unknown:
        raise TypeError(f"{type(item).__name__} has no field {sorted(unknown)[0]!r}")
    return type(item)(**{name: changes.get(name, item.__dict__[name]) for name in item.__record_fields__})


def asdict(item):
    """A record as a dict of its fields, records inside lists, tuples and dicts turned too (as
    ``dataclasses.asdict``, without copying other values)."""
    if hasattr(type(item), "__record_fields__"):
        return {name: asdict(item.__dict__[name]) for name in item.__record_fields__}
    if isinstance(item, (list, tuple)):
        return type(item)(asdict(v) for v in item)
    if isinstance(item, dict):
        return {k: asdict(v) for k, v in item.items()}
    return item
