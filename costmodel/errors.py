"""The one exception type for bad input: the CLI prints its message on one line and exits 2."""


class CostModelError(ValueError):
    """A user-facing error: unknown name, impossible layout, malformed file, bad unit."""
