"""A mixture of experts' quantities of a :class:`~costmodel.cost.shape.Shape`: its experts' parameters,
routed and padding FLOPs, and the tensors its routed experts save.

``Shape`` inherits these methods; they read its MoE fields (E experts, k_e of them per token, each F_e
wide; F_s of shared experts together; L_d leading layers with a dense MLP) and its dense widths. Like
the rest of ``Shape`` each body calls the pure formulas, so numbers, arrays and letters all work.
"""

from __future__ import annotations

from costmodel.formulas import activations as ac
from costmodel.formulas import flops as fl
from costmodel.formulas import params as pa

#: the letters of a mixture of experts (E experts, k_e of them per token, F_e wide; F_s of shared
#: experts; L_d dense layers)
MOE_LETTERS = {"experts": "E", "top_k": "k_e", "expert_width": "F_e", "shared_width": "F_s",
               "dense_layers": "L_d"}


def moe_fields(moe) -> dict:
    """Shape fields of a Transformer spec's ``moe`` (none for a dense model)."""
    if moe is None:
        return {}
    return dict(experts=moe.experts, top_k=moe.top_k, expert_width=moe.expert_ffn_hidden,
                shared_width=moe.shared_ffn_hidden, dense_layers=moe.dense_layers, shared_gate=moe.shared_gate,
                capacity_factor=moe.capacity_factor)


class MixtureOfExperts:
    """Shape's per-quantity methods of its MoE layers (the fields are Shape's)."""

    @property
    def moe(self) -> bool:
        """Whether the model has MoE layers (structure: a number of experts, or a letter)."""
        return not (isinstance(self.experts, int) and self.experts == 0)

    @property
    def moe_layers(self):
        """Layers whose MLP is a mixture of experts: L - L_d (0 for a dense model)."""
        return self.layers - self.dense_layers if self.moe else 0

    # ---- parameters -------------------------------------------------------------------------
    def expert_params(self):
        """One routed expert's MLP (F_e wide)."""
        return pa.routed_expert_params(hidden=self.width, expert_ffn_hidden=self.expert_width, gated=self.gated)

    def moe_parts(self) -> dict:
        """One MoE layer's MLP by part: the routed experts, the shared experts, the router."""
        return {"experts": self.experts * self.expert_params(),
                "shared_experts": pa.shared_expert_params(hidden=self.width, shared_ffn_hidden=self.shared_width,
                                                          gated=self.gated, shared_gate=self.shared_gate),
                "router": pa.router_params(hidden=self.width, experts=self.experts)}

    def moe_replicated_params(self):
        """What every TP rank keeps whole of an MoE layer's MLP: the router E D, and the shared-expert gate D."""
        return pa.router_params(hidden=self.width, experts=self.experts) + (self.width if self.shared_gate else 0)

    def inactive_params(self):
        """Routed experts a token does not use: (L - L_d)(E - k_e) x one expert (0 for a dense model)."""
        return self.moe_layers * (self.experts - self.top_k) * self.expert_params() if self.moe else 0

    # ---- FLOPs ------------------------------------------------------------------------------
    def moe_mlp_forward_flops_per_token(self):
        """An MoE layer's MLP per token: router, k_e experts, shared experts."""
        return fl.moe_mlp_forward_flops_per_token(hidden=self.width, experts=self.experts, top_k=self.top_k,
                                                  expert_ffn_hidden=self.expert_width,
                                                  shared_ffn_hidden=self.shared_width, gated=self.gated,
                                                  shared_gate=self.shared_gate)

    def routed_flops_per_token(self):
        """Forward FLOPs per token of the routed experts over every MoE layer: (L - L_d) k_e 2 x one expert."""
        if not self.moe:
            return 0
        return self.moe_layers * self.top_k * fl.matmul_flops(tokens=1, fan_in=1, fan_out=self.expert_params())

    def padding_flops_per_token(self):
        """Forward FLOPs per token the MoE layers run on capacity padding (0 dropless or dense)."""
        if not self.moe or self.capacity_factor is None:
            return 0
        return self.moe_layers * fl.capacity_padding_flops_per_token(
            hidden=self.width, top_k=self.top_k, expert_ffn_hidden=self.expert_width, gated=self.gated,
            capacity_factor=self.capacity_factor)

    # ---- activations ------------------------------------------------------------------------
    def moe_layer_activation_bytes_per_token(self, with_shared, *, act_bytes, tp, sp: bool, routed_factor, etp):
        """An MoE layer per token: ``with_shared`` (the layer with its shared experts in place of the MLP),
        plus the routed experts' tensors on the busiest device (``routed_factor``: capacity factor or load
        imbalance), plus Qwen2-MoE's shared-expert gate."""
        out = with_shared + ac.routed_expert_bytes_per_token(hidden=self.width, top_k=self.top_k,
                                                             expert_ffn_hidden=self.expert_width, act_bytes=act_bytes,
                                                             gated=self.gated, tp=tp, routed_factor=routed_factor,
                                                             etp=etp)
        if self.shared_gate:
            out = out + ac.shared_gate_bytes_per_token(hidden=self.width, act_bytes=act_bytes, tp=tp if sp else 1)
        return out

    def moe_mlp_norm_copies(self, shared: int) -> int:
        """Copies of the MLP norm's output an MoE layer's matmuls save under autocast: the router's, the
        shared experts' ``shared`` (gate and up, or one fused), and their gate's."""
        return 1 + (shared if self.shared_width else 0) + (1 if self.shared_gate else 0)
