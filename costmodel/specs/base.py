"""The bases specs share, and the bounded field types the specs are built from.

A spec (model, hardware, recipe, framework profile) is a frozen record (``costmodel.record``) whose field
annotations carry pydantic's constraints: the numeric path builds shipped specs directly, with no
validation schema and no pydantic class (issue 14: start-up). A spec read from a file is validated by a
pydantic model made from the record the first time one is needed (``costmodel.specs.validation``), with the
same rules as every checked input: frozen, unknown fields rejected, no inf or NaN (a file's ``1e999`` or
``NaN`` is an error, not a number), strict types (``"12"`` is not 12). Every count and rate has the sanity
bound of ``costmodel.inputs.bounds``, so no product the formulas form overflows. ``Checked`` is the same
rules as a pydantic model, for what is validated every time it is made (a layout, a results document).
"""

import dataclasses
from types import UnionType
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from costmodel.inputs import bounds
from costmodel.record import record

#: the rules every checked input follows
CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)


class Checked(BaseModel):
    """A pydantic model under the rules of every checked input; a misspelt field is an error, not a silent default."""

    model_config = CONFIG | ConfigDict(defer_build=True)  # schema built on first use: only what a command makes pays


class Declared:
    """What ``field(...)`` returns: pydantic ``Field(...)``'s arguments, kept until a validating model needs the
    ``FieldInfo`` (pydantic takes about 8 us to build one, and the spec modules declare about 130)."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple, kwargs: dict):
        self.args, self.kwargs = args, kwargs

    def info(self) -> FieldInfo:
        return Field(*self.args, **self.kwargs)

    @property
    def default(self):
        return self.args[0] if self.args else self.kwargs.get("default", PydanticUndefined)

    @property
    def default_factory(self):
        return self.kwargs.get("default_factory")


def field(*args, **kwargs) -> Declared:
    """``pydantic.Field`` for a spec's fields, as a default (``x: T = field(1, description=...)``) or in
    ``Annotated[T, field(gt=0)]``; the same arguments."""
    return Declared(args, kwargs)


class _ModelFields:
    """``Spec.model_fields``: the fields as pydantic describes them (the validating model is built to answer)."""

    def __get__(self, instance, owner):
        from costmodel.specs.validation import model_of

        return model_of(owner).model_fields


class Spec:
    """A frozen record with pydantic constraints on its fields (see the module's docstring). ``Spec(**fields)``
    validates, as a pydantic model's constructor does (pydantic.ValidationError names what is wrong); a
    shipped spec (``builtin``) and a copy (``model_copy``) are built without. It answers the pydantic calls
    callers and notebooks use: ``model_validate``, ``model_copy(update=...)``, ``model_dump``, ``model_fields``."""

    model_fields = _ModelFields()

    def __init__(self, **fields):
        from costmodel.specs.validation import validated_fields

        private = {name: value for name, value in fields.items() if name.startswith("_")}  # set by the loader
        self._fill({**validated_fields(type(self), {k: v for k, v in fields.items() if k not in private}), **private})

    @classmethod
    def _built(cls, fields: dict):
        """A spec of ``fields`` as they are (trusted: shipped, copied or validated already)."""
        spec = cls.__new__(cls)
        spec._fill(fields)
        return spec

    def _fill(self, fields: dict) -> None:
        """Set ``fields``, the others at their defaults (no ``__init__`` compiled on the numeric path)."""
        declared = type(self).__dataclass_fields__
        if not fields.keys() <= declared.keys():
            raise TypeError(f"{type(self).__name__} has no field {sorted(fields.keys() - declared.keys())}")
        values = self.__dict__
        for name, f in declared.items():
            if name in fields:
                values[name] = fields[name]
            elif f.default is not dataclasses.MISSING:
                values[name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                values[name] = f.default_factory()
            else:
                raise TypeError(f"{type(self).__name__} needs {name}")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        infos = {**getattr(cls, "__spec_info__", {})}  # a base spec's first
        for name in cls.__dict__.get("__annotations__", {}):
            value = cls.__dict__.get(name)
            if isinstance(value, (FieldInfo, Declared)):  # `x: T = field(default, description=...)`: the record
                # keeps the default, the validating model the rest
                infos[name] = value
                if value.default_factory is not None:
                    setattr(cls, name, dataclasses.field(default_factory=value.default_factory))
                elif value.default is PydanticUndefined:
                    delattr(cls, name)
                else:
                    setattr(cls, name, value.default)
        cls.__spec_info__ = infos
        record(cls, kw_only=True, init=False)  # Spec.__init__ validates; Spec._built builds what is trusted

    @classmethod
    def builtin(cls, **fields):
        """A spec shipped with cost4d (in the code or in ``hardware/``), built without validation;
        tests/test_specs.py validates every one and finds it equal. Nested specs given as tables (and lists
        of them) are built alike, and a whole number where a float is declared becomes a float, as
        validation makes it."""
        declared = cls.__dataclass_fields__
        return cls._built({name: _shipped(declared[name].type, value) for name, value in fields.items()})

    @classmethod
    def model_validate(cls, data):
        """``data`` validated by the spec's pydantic model (pydantic.ValidationError if it breaks a rule)."""
        from costmodel.specs.validation import validated

        return validated(cls, data)

    @classmethod
    def model_validate_json(cls, text: str):
        import json

        return cls.model_validate(json.loads(text))

    def model_copy(self, update: dict | None = None):
        """A copy with ``update``'s fields replaced (not validated, as pydantic's)."""
        return type(self)._built({**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, **(update or {})})

    def model_dump(self, *, exclude: set | None = None, exclude_none: bool = False, mode: str = "python") -> dict:
        """The fields as plain data, nested specs as dicts (every value is JSON's already, so ``mode`` changes
        nothing)."""
        return {f.name: plain(getattr(self, f.name), exclude_none) for f in dataclasses.fields(self)
                if not f.name.startswith("_") and f.name not in (exclude or ())
                and not (exclude_none and getattr(self, f.name) is None)}

    def model_dump_json(self) -> str:
        import json

        return json.dumps(self.model_dump(), separators=(",", ":"))


def plain(value, exclude_none: bool = False):
    """``value`` as plain data: a spec (or a list holding specs) as dicts of its fields, what its validating
    model reads and ``model_dump`` gives."""
    if isinstance(value, Spec):
        return value.model_dump(exclude_none=exclude_none)
    if isinstance(value, (list, tuple)):
        return [plain(v, exclude_none) for v in value]
    return value


def _shipped(annotation, value):
    """``value`` as validation would leave it for a field declared ``annotation`` (trusted input)."""
    if isinstance(value, dict):
        spec = next((t for t in _types(annotation) if isinstance(t, type) and issubclass(t, Spec)), None)
        return spec.builtin(**value) if spec is not None else value
    if isinstance(value, list):
        items = [arg for t in _types(annotation) if get_origin(t) is list for arg in get_args(t)]
        return [_shipped(items[0] if items else None, v) for v in value]
    if type(value) is int and float in _types(annotation) and int not in _types(annotation):
        return float(value)
    return value


def _types(annotation) -> list:
    """The types a field may hold: ``annotation`` with unions and ``Annotated`` opened (lists kept whole)."""
    if get_origin(annotation) is Annotated:
        return _types(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return [t for arg in get_args(annotation) for t in _types(arg)]
    return [annotation]


def count(most: int):
    """A whole number from 1 to ``most``."""
    return Annotated[int, Field(gt=0, le=most)]


def elements(least: int):
    """A count of tensor elements, from ``least`` to 2^40: a whole number, or a float without a fraction
    (DeepSpeed's configs write ``5e8``, which JSON and TOML read as a float), taken as that whole number."""
    return Annotated[int, BeforeValidator(_whole_float), Field(ge=least, le=2**40)]


def _whole_float(value):
    return int(value) if type(value) is float and value.is_integer() else value


def rate(bound: tuple[float, float]):
    """A finite rate (FLOP/s, B/s) within ``bound``."""
    return Annotated[float, Field(ge=bound[0], le=bound[1])]


#: a name printed in tables, file names and LaTeX: printable (no control or bidi characters), one line, bounded
Name = Annotated[str, StringConstraints(min_length=1, max_length=bounds.NAME,
                                        pattern=r"^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+$")]
#: free text (descriptions, sources): one line or several, no control characters but newlines and tabs
Text = Annotated[str, StringConstraints(max_length=20_000, pattern=r"^[^\x00-\x08\x0b-\x1f\x7f]*$")]
#: a band's ends as predicted / measured - 1: the low end (the fastest runs, -0.99 to 0) and the high end (0 to 10)
LowError = Annotated[float, Field(ge=-0.99, le=0)]
HighError = Annotated[float, Field(ge=0, le=10)]
#: seconds, non-negative and bounded
Seconds = Annotated[float, Field(ge=bounds.SECONDS[0], le=bounds.SECONDS[1])]
