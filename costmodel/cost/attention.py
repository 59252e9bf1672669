"""Flash attention as its own kernel class: the time of attention's Q K^T and A V from the kernel's measured
throughput by head dim and sequence (costmodel/measure/attention.py), where the hardware ships such a table.

Without one (or with ``gemm`` chosen), attention's FLOPs run at the GEMM efficiency with the linear layers,
over the full s x s, as before this module: cost/step.py decides which.
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.formulas import step as fs
from costmodel.inputs.files import shown
from costmodel.mathops import family, minimum

#: the choice that times attention with the linear layers' GEMMs (no kernel table)
GEMM = "gemm"
#: decoder LMs mask the future: a causal kernel does half the s x s work (the only mask cost4d models)
CAUSAL_MASKED = 0.5


def attention_kernel(hardware, framework=None, chosen: str | None = None, flash: bool = True) -> str | None:
    """The kernel a step times attention with: ``chosen`` (--attention-kernel), else the framework's where
    the hardware's table measures it, else the hardware's default; None (attention at the GEMM efficiency)
    for math attention (``flash`` False), where the hardware has no table or where ``gemm`` was chosen. A
    chosen kernel the table lacks is an error naming those it has, as is one chosen for math attention."""
    sm = hardware.step_model
    if chosen not in (None, GEMM) and not flash:
        raise CostModelError(f"--attention-kernel {shown(chosen)} is a flash kernel: math attention (--attention "
                             "math|eager) runs as GEMMs (use --attention-kernel gemm or --attention flash)")
    if not flash or chosen == GEMM or (chosen is None and sm.attention_table is None):
        return None
    if sm.attention_table is None:
        raise CostModelError(f"--attention-kernel {shown(chosen)}: {hardware.name} has no attention table "
                             f"(only {GEMM})")
    from costmodel.measure.attention import kernels

    known = kernels(_table(hardware))
    if chosen is not None and chosen not in known:
        raise CostModelError(f"--attention-kernel {shown(chosen)}: {hardware.name}'s table measures "
                             f"{', '.join(known)} (or {GEMM})")
    preferred = framework.attention_kernel if framework is not None else None
    return chosen or (preferred if preferred in known else sm.attention_kernel)


def attention_seconds(shape, point, hardware, kernel: str, *, forward_flops, rerun):
    """One device's flash-attention time: ``forward_flops`` (Q K^T and A V of its forwards, full s x s) under
    a causal mask, ``rerun`` of them run again by recomputation, each pass at ``kernel``'s measured rate for
    the model's head dim and the key length one call sees (s / c under ring context parallelism, each step a
    block of s / c queries against s / c keys; s under all-to-all, which splits heads instead; at most a
    document under a document mask, whose FLOPs count attention within documents). Returns
    (seconds, (forward rate, backward rate)): in letters the rates are R_fwd and R_bwd."""
    sm = hardware.step_model
    seq = shape.seq_len if point.cp_kind == "a2a" else shape.seq_len / point.cp
    if point.document is not None:  # each document attends within itself: shorter calls (the FLOPs count it)
        seq = minimum(seq, point.document)
    if family(seq, forward_flops) == "sympy":
        import sympy

        fwd, bwd = sympy.Symbol("R_fwd", positive=True), sympy.Symbol("R_bwd", positive=True)
    else:
        from costmodel.measure.attention import attention_rate

        path = _table(hardware)
        scale = hardware.flops("bf16") / (sm.tables_peak_flops or hardware.flops("bf16"))  # its device's rates
        fwd, bwd = (scale * attention_rate(path, kernel, d, True, shape.head_dim, seq) for d in ("fwd", "bwd"))
    return fs.attention_kernel_seconds(forward_flops=forward_flops, rerun=rerun, masked=CAUSAL_MASKED,
                                       rate_fwd=fwd, rate_bwd=bwd, sustained=sm.sustained_fraction), (fwd, bwd)


def _table(hardware) -> str:
    from costmodel.specs.load import table_file

    return str(table_file(hardware, hardware.step_model.attention_table))
