"""The GEMMs' achieved efficiency in a step: a measured table's figure at the step's shapes (or the spec's
one measured kernel, along the shape curve where it has one) times the fraction a whole training step
sustains; in letters e_mm and e_e."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.formulas import step as fs
from costmodel.mathops import exact_div, family
from costmodel.parallel import expert


def matmul_efficiency(shape, point, hardware):
    """Achieved / dense peak of the step's matmuls: the measured table's figure for the MLP's first
    matmul shape (tokens of a micro-batch x F/t x D), else the spec's one measured kernel (along the GEMM
    shape curve where the spec gives its shape and per-GEMM time), times the fraction a whole step sustains
    (``sustained_fraction``). In a formula it is the letter e_mm (its value comes from the table or the
    curve at the layout)."""
    isolated = _isolated_efficiency(shape, point, hardware)
    sustained = hardware.step_model.sustained_fraction
    if sustained == 1 or family(isolated) == "sympy":  # the letter e_mm stands for the product
        return isolated
    return isolated * sustained


def expert_matmul_efficiency(shape, point, hardware):
    """The routed experts' matmuls: the table's figure at an expert's shape on the busiest device
    (rows: the token copies it holds for one of its E / e experts, T/(c t) k_e f t_e e / E; columns F_e / t_e;
    depth D), times the sustained fraction; without a table, the shape curve at that shape, or the dense figure
    where the spec has neither. Small experts and few tokens per expert run well below the dense MLP's
    efficiency."""
    sm = hardware.step_model
    if not sm.matmul_table and sm.matmul_overhead_s is None:
        return matmul_efficiency(shape, point, hardware)
    etp = expert.expert_tp(point)
    rows = expert.dispatched_tokens(shape, point) * etp * point.ep / shape.experts
    isolated = _isolated_efficiency(shape, point, hardware, rows, exact_div(shape.expert_width, etp), "e_e")
    return isolated if family(isolated) == "sympy" else isolated * sm.sustained_fraction


def mlp_gemm_shape(shape, point) -> tuple:
    """(rows, columns, depth) of the GEMM whose measured efficiency stands for the step's matmuls: the
    MLP's first, a micro-batch's tokens (/ c) x F / t x D."""
    return exact_div(point.tokens, point.cp), exact_div(shape.mlp_width, point.tp), shape.width


def _isolated_efficiency(shape, point, hardware, m=None, n=None, name: str = "e_mm"):
    sm = hardware.step_model
    if sm is None:
        raise CostModelError(f"{hardware.name} has no step_model section (matmul efficiency, achieved HBM bandwidth)")
    if not sm.matmul_table and sm.matmul_efficiency is None:
        raise CostModelError(f"{hardware.name}: step_model needs matmul_efficiency or matmul_table")
    if not sm.matmul_table and sm.matmul_overhead_s is None:
        return sm.matmul_efficiency
    if m is None:
        m, n, _ = mlp_gemm_shape(shape, point)
    if family(m, n) == "sympy":
        import sympy

        return sympy.Symbol(name, positive=True)
    if sm.matmul_table:
        from costmodel.measure.matmul import table_efficiency
        from costmodel.specs.load import table_file

        measured_on = sm.tables_peak_flops or hardware.flops("bf16")  # efficiency relative to its own device
        return table_efficiency(table_file(hardware, sm.matmul_table), m, n, shape.width, measured_on)
    mm, mn, mk = sm.matmul_shape  # one measured kernel: the shape curve through it
    return fs.gemm_shape_efficiency(flops=2 * m * n * shape.width, peak_flops=hardware.flops("bf16"),
                                    measured_flops=2 * mm * mn * mk, measured_efficiency=sm.matmul_efficiency,
                                    overhead_s=sm.matmul_overhead_s)
