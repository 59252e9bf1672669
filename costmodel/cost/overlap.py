"""Whether a step's DP/FSDP traffic hides behind backward: --data-overlap, else the framework's own default (its
source named), else overlap, what most frameworks do."""

from __future__ import annotations


def data_overlap(framework, point, chosen: str | None):
    """(hidden, why): whether the DP/FSDP traffic hides behind backward, and whose word that is. ``chosen``
    (--data-overlap) wins; else the framework's default (a bool, or for DeepSpeed a mask over a plan's pipeline
    depths); else overlap, what most frameworks do. A framework's fitted time sets its own (step_time)."""
    if chosen is not None:
        return chosen, "--data-overlap" + _against_default(framework, point, chosen)
    why = data_overlap_source(framework)
    if framework is None or framework.exact:  # symbolic costs run the exact accounting only
        return "overlap", why
    if framework.data_overlap is not None:
        return framework.data_overlap, why
    if framework.zero_buffers:
        from costmodel.cost.zero import overlap_comm

        return overlap_comm(framework, point), why
    return "overlap", why


def data_overlap_source(framework) -> str:
    """Whose default --data-overlap takes when it is not given, in words."""
    if framework is None or framework.exact:
        return "the default for the exact accounting: what most frameworks do"
    if framework.data_overlap is not None:
        return f"{framework.name}'s default" + (f": {framework.data_overlap_source}" if framework.data_overlap_source
                                                 else "")
    if framework.zero_buffers:
        return f"{framework.name}'s overlap_comm" + (
            "" if framework.overlap_comm is not None else ": its default, on at ZeRO-3 only, and off under its "
            "pipeline engine; off, the gradient reduction runs on the compute stream")
    return f"{framework.name}'s default: overlapped"


def _against_default(framework, point, chosen: str) -> str:
    """Where --data-overlap asks for what the framework cannot do (DeepSpeed's pipeline engine turns
    overlap_comm off, engine.py L1639-1642), a note saying so; the user's word still holds."""
    if chosen != "overlap" or framework is None or not framework.zero_buffers or not isinstance(point.pp, int):
        return ""
    if point.pp > 1:
        return f"; {framework.name}'s pipeline engine cannot: it turns overlap_comm off"
    return ""
