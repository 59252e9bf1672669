"""The pydantic model that validates a spec read from a file, made from the spec's record when first needed.

A spec class (``costmodel.specs.base.Spec``) declares its fields once, with pydantic's constraints in their
annotations and ``Field(...)`` defaults with descriptions. The model made here has those same fields (a
nested spec's type replaced by its own model), the spec's validators (``field_validator``,
``model_validator``) and its methods and properties (which the validators may call), under the rules every
checked input follows (``base.CONFIG``). A validated model becomes the spec's record, field by field.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from types import UnionType

from pydantic import BaseModel, ConfigDict, Field, create_model

from costmodel.specs.base import CONFIG, Declared, Spec, plain


@functools.cache
def model_of(cls: type) -> type[BaseModel]:
    """The pydantic model validating spec ``cls``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {}
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):  # set by the loader, not read from a file
            continue
        info = cls.__spec_info__.get(f.name)
        if isinstance(info, Declared):
            info = info.info()
        if info is None:
            info = Field(f.default) if f.default is not dataclasses.MISSING else (
                Field(default_factory=f.default_factory) if f.default_factory is not dataclasses.MISSING else Field())
        fields[f.name] = (_mapped(hints[f.name]), info)
    members = {name: value for klass in reversed(cls.__mro__) if klass not in (object, Spec)
               for name, value in vars(klass).items()
               if not name.startswith("__") and name not in fields and _member(value)}
    model = create_model(cls.__name__, __config__=ConfigDict(**CONFIG), __doc__=cls.__doc__, __module__=cls.__module__,
                         __namespace__=members, **fields)
    model.__spec__ = cls
    return model


def _member(value) -> bool:
    """A spec's method, property or validator: what the model keeps of its class besides the fields."""
    return (isinstance(value, (types.FunctionType, property, classmethod, staticmethod))
            or type(value).__name__ == "PydanticDescriptorProxy")


def validated(cls: type, data):
    """``data`` as spec ``cls``, validated by its model (raises pydantic.ValidationError)."""
    return _record(model_of(cls).model_validate(data))


def validated_fields(cls: type, fields: dict) -> dict:
    """``fields`` given to ``cls(...)``, validated by its model, as the record's fields (nested specs given
    as specs or as dicts)."""
    model = model_of(cls).model_validate({name: plain(value) for name, value in fields.items()})
    return {name: _record(getattr(model, name)) for name in type(model).model_fields}


def _record(value):
    """A validated model (or a list of them) as spec records."""
    if isinstance(value, BaseModel) and hasattr(type(value), "__spec__"):
        return type(value).__spec__._built({name: _record(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, list):
        return [_record(v) for v in value]
    return value


def _mapped(annotation):
    """``annotation`` with every spec type in it replaced by that spec's model."""
    if isinstance(annotation, type) and issubclass(annotation, Spec):
        return model_of(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return typing.Annotated[(_mapped(args[0]), *(m.info() if isinstance(m, Declared) else m
                                                     for m in annotation.__metadata__))]
    if origin in (typing.Union, UnionType):
        return typing.Union[tuple(_mapped(a) for a in args)]
    if origin is list:
        return list[_mapped(args[0])]
    return annotation
