"""The activations a :class:`~costmodel.cost.shape.Shape`'s layers and pipeline stages save for backward, per
token: a whole layer, the norm outputs its matmuls keep, a fully recomputed layer's input, and the first and
last stages' extras.

``Shape`` inherits these methods; they read its widths and structure and call the pure formulas
(formulas/activations.py, formulas/memory.py), so numbers, arrays and letters all work.
Source: Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1 (as generalised in formulas/activations.py).
"""

from __future__ import annotations

from costmodel.formulas import activations as ac
from costmodel.formulas import memory as mem


class Activations:
    """Shape's per-quantity methods of saved activations (the fields are Shape's)."""

    def layer_activation_bytes_per_token(self, *, act_bytes, tp, sp: bool, selective: bool, flash: bool,
                                         norm_stats: bool, eager: bool = False, dense: bool = False,
                                         routed_factor=1, etp=None, autocast: bool = False, residual_bytes=None,
                                         fused_swiglu: bool = False):
        """One layer keeping everything (less the attention core under selective recompute), per token.

        An MoE layer (unless ``dense``): its shared experts in place of the MLP, plus the routed experts'
        tensors on the busiest device (``routed_factor``: capacity factor or load imbalance). Under
        ``autocast`` the norms save ``residual_bytes`` inputs and each matmul reading a norm output saves
        its own cast copy (:meth:`norm_output_copies`). ``fused_swiglu``: the MLP's (and shared experts') SwiGLU
        saves its input only (formulas/activations.mlp_hidden_bytes_per_token); routed experts keep torch's count
        (Megatron-core's run weighted_bias_swiglu_impl, which folds the routing weight in: not modelled)."""
        if not self.attention:
            return act_bytes * mem.ffn_activation_elements_per_token(
                d_model=self.width, d_ff=self.mlp_width, layers=1, gated=self.gated, activation=self.activation,
                tp=tp, sp=sp)
        moe = self.moe and not dense
        stats = (8 if self.layernorm else 4) if norm_stats else 0  # fp32 rstd (LayerNorm: and mean)
        qkv_inputs, mlp_inputs = self.norm_output_copies(autocast, dense)
        outside = ac.outside_tp_bytes_per_token(hidden=self.width, act_bytes=act_bytes, dropout=self.dropout,
                                                norm_stat_bytes=stats, qkv_inputs=qkv_inputs, mlp_inputs=mlp_inputs,
                                                residual_bytes=act_bytes if residual_bytes is None else residual_bytes,
                                                norm_inputs=self.norm_inputs_per_layer, norms=self.norms_per_layer)
        mlp_width = self.shared_width if moe else self.mlp_width
        if self.mla:
            inside, latents = self.mla_layer_activation_bytes_per_token(act_bytes=act_bytes, mlp_width=mlp_width,
                                                                         norm_stat_bytes=stats, fused_swiglu=fused_swiglu)
            outside = outside + latents
        else:
            inside = ac.inside_tp_bytes_per_token(**self._attn(), ffn_hidden=mlp_width, act_bytes=act_bytes,
                                                  gated=self.gated, fused_swiglu=fused_swiglu)
            if self.qk_norm:  # Qwen3: each query and key head normed before RoPE, its input and statistic saved
                inside = inside + ac.qk_norm_bytes_per_token(heads=self.heads, kv_heads=self.kv_heads,
                                                             head_dim=self.head_dim, act_bytes=act_bytes,
                                                             norm_stat_bytes=4 if norm_stats else 0)
            if self.fused and flash:  # V is a view of the fused QKV output, which flash keeps alive whole
                inside = inside + ac.fused_qkv_view_bytes_per_token(heads=self.heads, kv_heads=self.kv_heads,
                                                                    head_dim=self.head_dim, act_bytes=act_bytes)
        core = ac.attention_core_bytes_per_token(heads=self.heads, head_dim=self.head_dim, seq_len=self.seq_len,
                                                 act_bytes=act_bytes, dropout=self.dropout, flash=flash,
                                                 eager=eager, kv_heads=self.kv_heads)
        out = ac.layer_activation_bytes_per_token(outside=outside, inside=inside, core=core, tp=tp, sp=sp,
                                                  policy="selective" if selective else "none")
        if not moe:
            return out
        return self.moe_layer_activation_bytes_per_token(out, act_bytes=act_bytes, tp=tp, sp=sp,
                                                         routed_factor=routed_factor, etp=etp)

    def norm_output_copies(self, autocast: bool, dense: bool = False) -> tuple[int, int]:
        """(copies of the attention norm's output, of the MLP norm's) that matmuls save. In low precision
        one tensor serves every reader: (1, 1). Under autocast the fp32 norm output is cast once per
        matmul that reads it (autocast does not cache casts of activations): Q, K, V (MLA: its two down
        projections), gate and up; an MoE layer's router, shared experts' gate and up, and Qwen2-MoE's
        shared gate (routed copies are gathered before their cast, counted with the experts). A fused
        QKV or gate-up projection reads it once (``fused_projections``). A parallel block's one norm
        output serves attention and the MLP: in low precision (1, 0)."""
        if not (autocast and self.attention):
            return (1, 0) if self.block == "parallel" else (1, 1)
        if self.fused:
            attention, mlp, shared = 1, 1, 1
        else:
            attention = 2 if self.mla else 3
            mlp = shared = 2 if self.gated else 1
        if self.moe and not dense:
            return attention, self.moe_mlp_norm_copies(shared)
        return attention, mlp

    def layer_input_bytes_per_token(self, *, act_bytes, tp, sp: bool):
        """A fully recomputed layer keeps its input only (split over t with SP): ``act_bytes`` is the
        residual stream's (fp32 under autocast)."""
        return ac.layer_input_bytes_per_token(hidden=self.width, act_bytes=act_bytes) / (tp if sp else 1)

    def first_stage_extra_bytes_per_token(self, *, act_bytes, autocast: bool):
        """The FFN stack's fp32 input cast once per matmul that reads it (autocast only)."""
        if self.attention or not autocast:
            return 0
        return act_bytes * mem.autocast_input_cast_elements_per_token(d_model=self.width, gated=self.gated)

    def last_stage_extra_bytes_per_token(self, *, act_bytes, tp, norm_stats: bool = True, residual_bytes=None,
                                         sp: bool = False):
        """The output layer's extras on the last stage (final norm input in the residual stream's dtype,
        its statistics, logits input: / t under SP; fp32 logits / t)."""
        if not self.attention:
            return 0
        stats = (8 if self.layernorm else 4) if norm_stats else 0
        return ac.output_layer_bytes_per_token(hidden=self.width, vocab=self.vocab, act_bytes=act_bytes, tp=tp,
                                               norm_stat_bytes=stats, sp=sp,
                                               residual_bytes=act_bytes if residual_bytes is None else residual_bytes)
