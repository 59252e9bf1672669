"""``@record``: ``@dataclass(frozen=True)``, its ``__init__`` compiled when first looked up, its other methods shared.

Why: on Python 3.11 a frozen dataclass costs about 1 ms to create (six generated methods, each compiled
apart), and `cost4d step` creates about 20 of them before it prints anything (issue 14; benchmarks/
cold_start.py). A record compiles only ``__init__``, when it is first looked up; ``__repr__``, ``__eq__``,
``__hash__`` and the frozen ``__setattr__`` are shared functions that read the class's field names: a record
costs about 0.1 ms to compile and a few hundredths of a millisecond to create. It is a dataclass to the standard library: ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work on it (it carries
``__dataclass_fields__``), fields are declared with ``dataclasses.field``, assignment raises
``dataclasses.FrozenInstanceError``. What it does as ``@dataclass(frozen=True)`` does: fields are the
annotations in order (a base record's first; ``ClassVar`` ones are not fields); ``__init__`` (calling
``__post_init__`` if the class has one), ``__repr__``, ``__eq__`` and ``__hash__`` over the compared fields,
each only where the class does not define its own; an unhashable default is refused; ``@record(kw_only=True)``
makes every field keyword-only. Not supported (no record needs them): ``InitVar``, ``init=False`` fields,
slots, ordering.
"""

from __future__ import annotations

import dataclasses
import operator
import typing


class _Factory:
    """The default a signature shows for a field built by a factory (as dataclasses' ``<factory>``)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def record(cls=None, *, kw_only: bool = False, init: bool = True):
    """Make ``cls`` a frozen dataclass (see the module's docstring); with ``kw_only``, every field is
    keyword-only (``dataclass(kw_only=True)``), so a field without a default may follow one with; with
    ``init=False`` no ``__init__`` is generated (the class builds its instances itself)."""
    if cls is None:
        return lambda c: record(c, kw_only=kw_only, init=init)
    fields = {f.name: f for f in getattr(cls, "__dataclass_fields__", {}).values()}  # a base record's first
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, dataclasses.MISSING)
        spec = value if isinstance(value, dataclasses.Field) else dataclasses.field(default=value)
        if spec.default is not dataclasses.MISSING and type(spec.default).__hash__ is None:
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is not allowed: use "
                             "default_factory")
        if isinstance(value, dataclasses.Field):  # the class keeps a plain default as its attribute, as dataclasses do
            delattr(cls, name) if spec.default is dataclasses.MISSING else setattr(cls, name, spec.default)
        # what dataclasses.fields() reads; _FIELD is private but has marked fields since Python 3.7
        spec.name, spec.type, spec._field_type, spec.kw_only = name, annotation, dataclasses._FIELD, kw_only
        fields[name] = spec
    if not kw_only:
        _check_order(fields)
    cls.__dataclass_fields__, cls.__record__ = fields, True
    cls.__record_repr__ = tuple(name for name, f in fields.items() if f.repr)
    cls.__record_key__ = staticmethod(_key([name for name, f in fields.items() if f.compare]))
    shared = {"__init__": _Lazy(cls) if init else None, "__repr__": _repr, "__eq__": _eq, "__hash__": _hash,
              "__setattr__": _setattr, "__delattr__": _delattr}
    for method, function in shared.items():
        if method not in cls.__dict__ and function is not None:
            setattr(cls, method, function)
    return cls


def _key(names: list):
    """The compared fields' values of a record as a tuple (what ``__eq__`` and ``__hash__`` read)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    get = operator.attrgetter(*names) if names else None
    return (lambda o: (get(o),)) if names else (lambda o: ())


def _repr(self) -> str:
    return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__record_repr__)})"


def _eq(self, other):
    if other.__class__ is self.__class__:
        return self.__record_key__(self) == self.__record_key__(other)
    return NotImplemented


def _hash(self) -> int:
    return hash(self.__record_key__(self))


class _Lazy:
    """Stands in a record's class for its generated ``__init__`` until that is first looked up (to build an
    instance or read the signature); the lookup compiles it and puts it in the stand-in's place."""

    __slots__ = ("cls",)

    def __init__(self, cls):
        self.cls = cls

    def __get__(self, instance, owner=None):
        cls, fields = self.cls, self.cls.__dataclass_fields__
        namespace = {"_factory": _FACTORY}
        exec(_source(fields, hasattr(cls, "__post_init__"), namespace), namespace)  # noqa: S102 - our own text
        init = namespace["__init__"]
        init.__qualname__, init.__module__ = f"{cls.__qualname__}.__init__", cls.__module__
        init.__annotations__ = {**{name: f.type for name, f in fields.items()}, "return": None}
        cls.__init__ = init
        return init.__get__(instance, owner)


def _check_order(fields: dict) -> None:
    """A field without a default may not follow one with a default (as dataclasses refuses)."""
    seen_default = False
    for name, f in fields.items():
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        seen_default = seen_default or has_default


def _is_classvar(annotation) -> bool:
    """A ClassVar annotation, written out or (postponed annotations) as text, as dataclasses tells it."""
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def _source(fields: dict, post_init: bool, namespace: dict) -> str:
    """``__init__``'s text; defaults and factories go into ``namespace`` as ``_d_<name>`` / ``_f_<name>``."""
    params, lines = [], []
    for name, f in fields.items():
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_factory")
            lines.append(f"    __record_dict__['{name}'] = _f_{name}() if {name} is _factory else {name}")
        else:
            if f.default is not dataclasses.MISSING:
                namespace[f"_d_{name}"] = f.default
                params.append(f"{name}=_d_{name}")
            else:
                params.append(name)
            lines.append(f"    __record_dict__['{name}'] = {name}")
    lines.append("    __record_self__.__post_init__()" if post_init else "    pass")
    if any(f.kw_only is True for f in fields.values()):
        params.insert(0, "*")
    return (f"def __init__(__record_self__, {', '.join(params)}):\n"
            "    __record_dict__ = __record_self__.__dict__\n" + "\n".join(lines) + "\n")


def _setattr(self, name, value):
    """A record's fields are frozen; so is every attribute of a record itself (a plain subclass may add its own),
    as a frozen dataclass's ``__setattr__`` has it."""
    if "__record__" in type(self).__dict__ or name in type(self).__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self, name):
    """As :func:`_setattr`, for deleting."""
    if "__record__" in type(self).__dict__ or name in type(self).__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)
