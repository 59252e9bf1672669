"""FLOPs of one step: per token (model and hardware), per replica step, per device."""

from __future__ import annotations

from costmodel.cost.stage import recomputed_layers
from costmodel.formulas import flops as fl
from costmodel.mathops import maximum, where
from costmodel.parallel.expert import routed_factor
from costmodel.record import record


@record
class StepFlops:
    """FLOPs of one step per token and per device: the model's (MFU) and those recomputed (HFU)."""

    forward_per_token: object
    backward_per_token: object
    tokens: object  # tokens of one model replica's micro-batch
    devices_per_replica: object  # tp x pp x cp share one replica's work
    recompute_per_token: object = 0  # forward FLOPs run again in backward (HFU counts them, MFU not)
    attention_per_token: object = 0  # of the model FLOPs, attention's Q K^T and A V over the full s x s (fwd + bwd)
    padding_per_token: object = 0  # MoE capacity padding (fwd + bwd): hardware FLOPs, not model FLOPs
    straggler_per_token: object = 0  # the busiest EP rank's routed work beyond the even share (time, not FLOPs)
    routed_per_token: object = 0  # of the model FLOPs, the routed experts' (fwd + bwd)
    attention_recompute_per_token: object = 0  # of recompute_per_token, attention's Q K^T and A V run again
    stage_imbalance: object = 1  # p x the busiest pipeline stage's share (1: one stage, or a balanced split)

    @property
    def routed_hardware_per_token(self):
        """What the busiest EP rank's routed experts run per token: their model FLOPs, padding, straggling."""
        return self.routed_per_token + self.padding_per_token + self.straggler_per_token

    @property
    def attention_forward_per_token(self):
        """Attention's Q K^T and A V of one forward per token (a third of its fwd + bwd)."""
        return self.attention_per_token / 3

    @property
    def attention_rerun(self):
        """The forwards of attention recomputation reruns, as a fraction of one (0 without recomputation)."""
        if isinstance(self.attention_recompute_per_token, int) and self.attention_recompute_per_token == 0:
            return 0
        return self.attention_recompute_per_token / self.attention_forward_per_token

    @property
    def per_token(self):
        """Model FLOPs per token (MFU's numerator)."""
        return self.forward_per_token + self.backward_per_token

    def model_per_token(self, convention: str = "full"):
        """Model FLOPs per token with attention counted over the full s x s or, ``causal``, the half a
        causal mask leaves (PaLM, Chowdhery et al. 2022, arXiv:2204.02311, App. B counts it full;
        Llama 3 and many reports halve it)."""
        return self.per_token - (self.attention_per_token / 2 if convention == "causal" else 0)

    @property
    def hardware_per_token(self):
        """What the hardware runs: model FLOPs + recomputation + MoE capacity padding (HFU's numerator)."""
        return self.per_token + self.recompute_per_token + self.padding_per_token

    @property
    def forward(self):
        return self.forward_per_token * self.tokens

    @property
    def backward(self):
        return self.backward_per_token * self.tokens

    @property
    def total(self):
        return self.per_token * self.tokens

    @property
    def per_device(self):
        """Model FLOPs of one device of the busiest pipeline stage: the replica's over its tp x pp x cp devices,
        times the stage imbalance (:func:`stage_imbalance`; the stage `memory` and `step` also price)."""
        return self.total * self.stage_imbalance / self.devices_per_replica


def recompute_flops_per_token(shape, point, seq_len=None):
    """Forward FLOPs recomputation adds per token: the recomputed layers' forward (full, every:K) or
    the attention core's Q K^T and A V (selective; Korthikanti et al. 2022, arXiv:2205.05198, Sec. 5).

    ``checkpoint`` non-reentrant (torch.utils.checkpoint with use_reentrant=False, early stop): the
    recomputation stops once every tensor backward needs exists again, so each layer's last matmul,
    whose output only feeds the residual add, is not run again: 2 F D fewer per layer and token
    (measured with FlopCounterMode in tests/test_torch_llama_activations.py); under selective
    recomputation of math attention the product with V, whose output the output projection saved, is not
    rerun either (2 s a d_v fewer; flash attention reruns its one kernel whole; tests/test_torch_autocast.py). Reentrant (and Megatron's recompute) reruns all.
    ``op`` (torchtitan's per-op policy): each block reruns every second matmul (its last one only when the rerun
    goes to the block's end, --checkpoint reentrant), not attention (formulas/op_checkpoint.py)."""
    if point.recompute == "selective":
        return attention_recompute_flops_per_token(shape, point, seq_len)
    if point.recompute == "op":  # torchtitan's policy: every second matmul (the last one only to the end), attention kept
        return shape.layers * shape.op_rerun_flops_per_token(stops_early=point.checkpoint == "non-reentrant")
    layer = shape.layer_forward_flops_per_token(seq_len)
    if point.checkpoint == "non-reentrant":
        layer = layer - 2 * shape.mlp_width * shape.width
    return recomputed_layers(shape.layers, point) * layer


def step_flops(shape, point, seq_len=None, stages=None) -> StepFlops:
    """Forward and backward FLOPs of one micro-batch of ``point.tokens`` tokens per replica; with the pipeline's
    ``stages`` (cost.stage.Stage), the busiest one's imbalance (else an even share per stage)."""
    return StepFlops(forward_per_token=shape.forward_flops_per_token(seq_len),
                     backward_per_token=shape.backward_flops_per_token(seq_len),
                     tokens=point.tokens, devices_per_replica=point.tp * point.pp * point.cp,
                     recompute_per_token=recompute_flops_per_token(shape, point, seq_len),
                     attention_per_token=3 * shape.layers * shape.attention_score_flops_per_token(seq_len),
                     padding_per_token=3 * shape.padding_flops_per_token(),
                     straggler_per_token=straggler_flops_per_token(shape, point),
                     routed_per_token=3 * shape.routed_flops_per_token(),
                     attention_recompute_per_token=attention_recompute_flops_per_token(shape, point, seq_len),
                     stage_imbalance=1 if stages is None else point.pp * busiest_share(shape, stages))


def busiest_share(shape, stages):
    """The largest stage's share of the model's forward FLOPs: max_i (L_i c + last_i c_o) / (L c + c_o).

    A pipeline runs at its slowest stage. c is a layer's forward FLOPs per token and c_o the output
    layer's (the embedding is a lookup: no FLOPs); p times the largest share is 1 for a balanced split
    and exceeds it when the last stage also runs the output layer or the split is uneven. Recomputation
    and backward are taken to follow the forward's split. Source: Narayanan et al. 2021,
    arXiv:2104.04473, Sec. 2.2 (a pipeline's throughput is its slowest stage's)."""
    layer = shape.layer_forward_flops_per_token()
    output = shape.forward_flops_per_token() - shape.layers * layer
    whole = shape.layers * layer + output
    share = None
    for st in stages:
        mine = where(st.role.exists, (st.layers * layer + st.role.last * output) / whole, 0)
        share = mine if share is None else maximum(share, mine)
    return share


def most_layers(stages):
    """The most layers any stage of the pipeline holds (its memory-bound ops set the pace)."""
    layers = None
    for st in stages:
        count = where(st.role.exists, st.layers, 0)
        layers = count if layers is None else maximum(layers, count)
    return layers


def attention_recompute_flops_per_token(shape, point, seq_len=None):
    """Of :func:`recompute_flops_per_token`, the attention core's (Q K^T and A V over the full s x s): every
    layer's under selective recomputation, the recomputed layers' under full (flash attention reruns its
    one kernel whole; math attention under non-reentrant selective recomputation skips A V, as there)."""
    if point.recompute in ("none", "op") or not shape.attention:  # op keeps attention's output
        return 0
    core = shape.attention_score_flops_per_token(seq_len)
    if point.recompute == "selective":
        if point.checkpoint == "non-reentrant" and not point.flash:
            core = core - fl.attention_value_flops_per_token(seq_len=shape.seq_len if seq_len is None else seq_len,
                                                             heads=shape.heads, v_head_dim=shape.value_dim)
        return shape.layers * core
    return recomputed_layers(shape.layers, point) * core


def straggler_flops_per_token(shape, point):
    """Routed-expert FLOPs (fwd + bwd) the busiest EP rank runs beyond the even share, per token: the
    load imbalance f - 1 of dropless routing (padding to a capacity is in the hardware FLOPs instead)."""
    if not shape.moe or shape.capacity_factor is not None:
        return 0
    return 3 * (routed_factor(shape, point) - 1) * shape.routed_flops_per_token()


def six_n_t(params, tokens):
    """The 6 N T rule of thumb: 6 FLOPs per parameter and token (Kaplan et al. 2020, arXiv:2001.08361, Sec. 2.1)."""
    return 6 * params * tokens
