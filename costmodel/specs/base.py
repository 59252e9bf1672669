"""The pydantic base every spec shares, and the bounded field types the specs are built from.

Frozen, unknown fields rejected, no inf or NaN (a file's ``1e999`` or ``NaN`` is an error, not a
number), strict types (``"12"`` is not 12). Every count and rate has the sanity bound of
``costmodel.inputs.bounds``, so no product the formulas form overflows.
"""

from types import UnionType
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from costmodel.inputs import bounds


class Spec(BaseModel):
    """Frozen spec; a misspelt field is an error, not a silent default."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True,
                              defer_build=True)  # schema built on first use: only the specs a command touches pay

    @classmethod
    def builtin(cls, **fields):
        """A spec shipped with cost4d (in the code or in ``hardware/``), built without validation so that the
        numeric path builds no schema for it; tests/test_specs.py validates every one and finds it equal.
        Nested specs given as tables (and lists of them) are built alike, and a whole number where a float
        is declared becomes a float, as validation makes it."""
        made = {name: field.default_factory() for name, field in cls.model_fields.items()
                if name not in fields and field.default_factory is not None}  # pydantic would inspect the
        # factory's signature (tokenizing `list`'s text signature: ~5 ms of start-up) to learn how to call it
        return cls.model_construct(**made, **{name: _shipped(cls.model_fields[name].annotation, value)
                                              for name, value in fields.items()})


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
#: seconds, non-negative and bounded
Seconds = Annotated[float, Field(ge=bounds.SECONDS[0], le=bounds.SECONDS[1])]
