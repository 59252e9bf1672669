"""The pydantic base every spec shares, and the bounded field types the specs are built from.

Frozen, unknown fields rejected, no inf or NaN (a file's ``1e999`` or ``NaN`` is an error, not a
number), strict types (``"12"`` is not 12). Every count and rate has the sanity bound of
``costmodel.inputs.bounds``, so no product the formulas form overflows.
"""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from costmodel.inputs import bounds


class Spec(BaseModel):
    """Frozen spec; a misspelt field is an error, not a silent default."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True,
                              defer_build=True)  # schema built on first use: only the specs a command touches pay

    @classmethod
    def builtin(cls, **fields):
        """A spec shipped in the code, built without validation so that the numeric path builds no schema
        for it (tests/test_specs.py::test_builtin_specs_validate validates every one)."""
        return cls.model_construct(**fields)


def count(most: int):
    """A whole number from 1 to ``most``."""
    return Annotated[int, Field(gt=0, le=most)]


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
