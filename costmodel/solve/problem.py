"""Build the solvers' inputs from specs and command-line overrides."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.inputs.files import shown
from costmodel.solve.batch import BatchProblem, check_problem

OVERLAPS = ("sum", "max")
PASSES = ("forward", "step")


def mlp_shape(model) -> tuple[int, int]:
    """(D, F) of the model's MLP: the FFN stack's, or the transformer's hidden and MLP widths."""
    return model.width, model.mlp_width


def base_bandwidth(hardware, fsdp: int, tp: int, axis: str = "fsdp") -> float:
    """W of one axis: ICI per torus axis on TPUs; on GPUs the level that axis's groups of an X x Y mesh reach
    (TP inside an NVLink domain, FSDP across nodes)."""
    if hardware.kind == "tpu":
        return hardware.level("ici").bandwidth_bytes_per_s
    from costmodel.cost.network import egress_bandwidth
    from costmodel.cost.placement import placement
    from costmodel.cost.point import Point

    return egress_bandwidth(hardware, placement(hardware, Point(fsdp=fsdp, tp=tp), axis))


def batch_problem(model, hardware, *, fsdp, tp, mx, my, overlap, pass_, peak_flops=None,
                  bandwidth=None) -> BatchProblem:
    """A checked BatchProblem; overrides replace the hardware's constants as given."""
    if overlap not in OVERLAPS:
        raise CostModelError(f"--overlap {shown(overlap)}: use sum or max")
    if pass_ not in PASSES:
        raise CostModelError(f"--pass {shown(pass_)}: use forward or step")
    if min(fsdp, tp) < 1:
        raise CostModelError(f"--fsdp and --tp must be >= 1 (got {fsdp}, {tp})")
    d_model, d_ff = mlp_shape(model)
    if peak_flops is None:
        peak_flops = hardware.flops("bf16")
    tp_bandwidth = None
    if bandwidth is None:  # --ici-bandwidth sets W for both axes
        bandwidth = base_bandwidth(hardware, fsdp, tp)
        tp_level = base_bandwidth(hardware, fsdp, tp, "tp")
        tp_bandwidth = tp_level if tp_level != bandwidth else None
    problem = BatchProblem(d_model=d_model, d_ff=d_ff, fsdp=fsdp, tp=tp, mx=mx, my=my, peak_flops=peak_flops,
                           bandwidth=bandwidth, overlap=overlap, pass_=pass_, tp_bandwidth=tp_bandwidth)
    check_problem(problem)
    from costmodel.cost.checks import placement_rules
    from costmodel.cost.point import Point

    for rule in placement_rules(hardware, Point(mx=mx, my=my, fsdp=fsdp, tp=tp)):
        if not rule.ok:
            raise CostModelError(rule.message())
    return problem
