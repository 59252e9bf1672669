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


def cp_overlap_default(framework, point) -> str:
    """The CP convention when --cp-overlap is not given. Under a framework, as its attention runs: ring attention
    passes the next block's K, V while the current block computes (overlap: Transformer Engine's
    AttnFuncWithCPAndKVP2P, 'overlap current-step compute with next-step communication'; torch's ring attention
    waits for each rotation only at the next block); Ulysses' all-to-alls (a2a) stand between the projections and
    attention (none). The exact accounting, and a framework's fitted time (fitted on runs without CP), keep CP on the
    critical path (none), as h100-sxm's step fraction was fitted (the DGXC rows' CP 2 passes are ~1% of their
    steps; refitting with them overlapped gave 0.863 for 0.868 over the 24 rows fitted then, which nanotron's
    fitted time would then follow)."""
    if framework is None or framework.exact or framework.time is not None:
        return "none"
    return "none" if point.cp_kind == "a2a" else "overlap"


def cp_exposed_seconds(rows, point, attention_s, overlap: str):
    """Seconds of the CP axis's timed ``rows`` left on the critical path. Overlapped (``overlap``), attention's traffic hides
    behind its blocks: an all-gather of K, V (torch's allgather rotation, waited for at the second block) behind the
    first block, attention / c; passes around the ring behind the rest; what exceeds them shows. The CP ranks'
    gradient all-reduce (replicas of the weights) runs after backward and Ulysses' all-to-alls stand between the
    projections and attention: on the critical path either way."""
    from costmodel.formulas.step import exposed_seconds

    gathers = sum((r.seconds for r in rows if r.collective.op == "all-gather"), 0)
    passes = sum((r.seconds for r in rows if r.collective.op == "send/recv"), 0)
    never = sum((r.seconds for r in rows if r.collective.op not in ("all-gather", "send/recv")), 0)
    first = attention_s / point.cp
    return (exposed_seconds(comm=gathers, hidden_behind=first, overlap=overlap)
            + exposed_seconds(comm=passes, hidden_behind=attention_s - first, overlap=overlap) + never)
