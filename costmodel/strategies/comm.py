"""All collectives of one training step for a model, recipe and layout, with their times."""

from __future__ import annotations

from dataclasses import dataclass, replace

from costmodel.formulas.comms import transfer_seconds
from costmodel.formulas.pipeline import p2p_bytes_per_microbatch
from costmodel.specs.hardware import Hardware
from costmodel.specs.layout import Layout
from costmodel.specs.recipe import Recipe
from costmodel.strategies import checks
from costmodel.strategies.collective import Collective
from costmodel.strategies.context_comm import context_collectives
from costmodel.strategies.data_comm import data_collectives
from costmodel.strategies.memory import stage_with_most_params
from costmodel.strategies.network import AxisLink, axis_link
from costmodel.strategies.stages import block_params_per_device, stage_layer_counts, stage_params_per_device
from costmodel.strategies.tensor_comm import model_end_collectives, tensor_collectives


def step_collectives(model, recipe: Recipe, layout: Layout) -> list[Collective]:
    """Every collective one device of the stage with the most parameters joins in one optimizer step.

    A step runs k = grad_accum x m micro-batches (m pipeline micro-batches). DDP and ZeRO-1/2 reduce
    gradients once per step; FSDP gathers and reduce-scatters for every micro-batch (FSDP2's default,
    which reshards after each backward), so its calls scale by k like those of TP, CP and PP.
    """
    checks.check_layout(model, layout)
    stage = stage_with_most_params(model, layout)
    layers = stage_layer_counts(model.layers, layout.pp)[stage]
    p_dev = stage_params_per_device(model, layout, stage)
    data = data_collectives(
        params=p_dev, root_params=p_dev - block_params_per_device(model, layout, stage), recipe=recipe,
        zero_stage=layout.zero_stage, fsdp=layout.fsdp, dp=layout.dp, layers=layers,
        reshard_after_forward=layout.reshard_after_forward,
        has_fsdp=layout.fsdp > 1, has_dp=layout.dp > 1)
    micro_steps = layout.grad_accum * layout.m
    out = [_per_microstep(c, micro_steps) if c.axis == "fsdp" and layout.zero_stage == 3 else c for c in data]
    per_micro = []  # collectives of one micro-batch's forward + backward
    tokens = layout.tokens // layout.cp
    if layout.tp > 1:
        width = model.d_model if model.kind == "ffn" else model.hidden
        per_micro += tensor_collectives(
            tokens=tokens, width=width, layers=layers, tp=layout.tp, act_bytes=recipe.activation_bytes,
            sp=layout.sp, pairs_per_layer=1 if model.kind == "ffn" else 2,
            first_input_grad=model.kind != "ffn" or model.input_requires_grad)
    if layout.tp > 1 and model.kind == "transformer":
        first, last = stage == 0, stage == layout.pp - 1
        per_step = model_end_collectives(
            tokens=tokens, width=model.hidden, tp=layout.tp, act_bytes=recipe.activation_bytes, sp=layout.sp,
            ends=layout.tp_ends, first=first, last=last, norms=2 * layers + (1 if last else 0),
            grad_bytes=recipe.grad_comm_bytes)
        per_micro += [c for c in per_step if c.phase != "optimizer"]
        out += [c for c in per_step if c.phase == "optimizer"]
    if layout.cp > 1 and model.kind == "transformer":
        per_micro += context_collectives(
            tokens=layout.tokens, heads=model.heads // layout.tp, kv_heads=model.kv_heads // layout.tp,
            head_dim=model.dim_per_head, layers=layers, cp=layout.cp, act_bytes=recipe.activation_bytes,
            kind=layout.cp_kind)
    if layout.pp > 1:
        per_micro += pipeline_sends(model, recipe, layout, tokens)
    return out + [_per_microstep(c, micro_steps) for c in per_micro]


def _per_microstep(c: Collective, times: int) -> Collective:
    return c if times == 1 else replace(c, calls=c.calls * times)


def pipeline_sends(model, recipe: Recipe, layout: Layout, tokens: int) -> list[Collective]:
    """A middle stage sends each micro-batch's activation on and its gradient back, v times with
    v interleaved chunks (Narayanan et al. 2021, Sec. 2.2.2: interleaving multiplies p2p traffic by v)."""
    width = model.d_model if model.kind == "ffn" else model.hidden
    size = p2p_bytes_per_microbatch(tokens=tokens, hidden=width, act_bytes=recipe.activation_bytes,
                                    tp=layout.tp, sp=layout.sp)
    return [Collective("send/recv", "pp", "activations to the next stage", "forward", 2, layout.chunks, size),
            Collective("send/recv", "pp", "gradients to the previous stage", "backward", 2, layout.chunks, size)]


@dataclass(frozen=True)
class TimedCollective:
    collective: Collective
    link: AxisLink

    @property
    def seconds(self) -> float:
        return transfer_seconds(bytes_sent=self.collective.bytes_sent, bandwidth=self.link.bandwidth)


def timed_collectives(model, recipe: Recipe, layout: Layout, hardware: Hardware) -> list[TimedCollective]:
    """Collectives with the level each runs on and its bandwidth-bound time."""
    return [TimedCollective(c, axis_link(hardware, layout, c.axis))
            for c in step_collectives(model, recipe, layout)]
