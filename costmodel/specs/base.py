"""The pydantic base every spec shares: frozen, unknown fields rejected."""

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen spec; a misspelt field is an error, not a silent default."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # schema built on first use: only the specs a command touches pay for it
