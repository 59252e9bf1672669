"""Multi-head latent attention's quantities of a :class:`~costmodel.cost.shape.Shape`: its projections'
parameters, FLOPs and saved tensors.

``Shape`` inherits these methods; they read its MLA fields (key/value latent r_kv, query latent r_q or
none, rotary width d_r, value head width d_v; head_dim is then the query/key width d_nope + d_r). Like
the rest of ``Shape`` each body calls the pure formulas, so numbers, arrays and letters all work.
Source: DeepSeek-AI 2024, arXiv:2405.04434 (DeepSeek-V2), Sec. 2.1.2-2.1.3.
"""

from __future__ import annotations

from costmodel.formulas import activations as ac
from costmodel.formulas import flops as fl
from costmodel.formulas import params as pa
from costmodel.mathops import is_zero

#: the letters of multi-head latent attention (query and key/value latents, rotary and value head widths)
MLA_LETTERS = {"q_rank": "r_q", "kv_rank": "r_kv", "rope_dim": "d_r", "v_head_dim": "d_v"}


def mla_fields(mla) -> dict:
    """Shape fields of a Transformer spec's ``mla`` (none for GQA)."""
    if mla is None:
        return {}
    return dict(kv_rank=mla.kv_lora_rank, q_rank=mla.q_lora_rank, rope_dim=mla.qk_rope_head_dim,
                v_head_dim=mla.v_head_dim)


class LatentAttention:
    """Shape's per-quantity methods of multi-head latent attention (the fields are Shape's)."""

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent attention (structure)."""
        return not is_zero(self.kv_rank)

    @property
    def q_latent(self) -> bool:
        """Whether MLA's queries go through a latent (structure: q_rank is not the literal 0)."""
        return not is_zero(self.q_rank)

    def _mla(self) -> dict:
        return dict(hidden=self.width, heads=self.heads, q_lora_rank=self.q_rank, kv_lora_rank=self.kv_rank,
                    qk_nope_head_dim=self.head_dim - self.rope_dim, qk_rope_head_dim=self.rope_dim,
                    v_head_dim=self.v_head_dim, q_latent=self.q_latent)

    def mla_attention_params(self):
        """One layer's MLA projections: down to the latents, their norms, and up to the heads."""
        return pa.mla_attention_params(**self._mla())

    def mla_replicated_params(self):
        """What every TP rank keeps whole of MLA: the latents' down projections and norms."""
        return pa.mla_replicated_params(hidden=self.width, q_lora_rank=self.q_rank, kv_lora_rank=self.kv_rank,
                                        qk_rope_head_dim=self.rope_dim, q_latent=self.q_latent)

    def mla_attention_forward_flops_per_token(self, seq_len):
        """One layer's MLA per token: projections and the score and value products."""
        return fl.mla_attention_forward_flops_per_token(**self._mla(), seq_len=seq_len)

    def mla_attention_score_flops_per_token(self, seq_len):
        """Q K^T (d_h wide) and A V (d_v wide) per layer and token."""
        return fl.mla_attention_score_flops_per_token(seq_len=seq_len, heads=self.heads, qk_head_dim=self.head_dim,
                                                      v_head_dim=self.v_head_dim)

    def mla_layer_activation_bytes_per_token(self, *, act_bytes, mlp_width, norm_stat_bytes,
                                             fused_swiglu: bool = False) -> tuple:
        """(inside the TP region, outside it) per token: MLA's attention tensors with the MLP's (from the
        GQA formula with no heads) inside; its latents outside."""
        inside = ac.mla_attention_bytes_per_token(heads=self.heads, qk_head_dim=self.head_dim,
                                                  v_head_dim=self.v_head_dim, act_bytes=act_bytes)
        inside = inside + ac.inside_tp_bytes_per_token(hidden=self.width, heads=0, kv_heads=0, head_dim=0,
                                                       ffn_hidden=mlp_width, act_bytes=act_bytes, gated=self.gated,
                                                       fused_swiglu=fused_swiglu)
        latents = ac.mla_latent_bytes_per_token(q_lora_rank=self.q_rank, kv_lora_rank=self.kv_rank,
                                                rope_head_dim=self.rope_dim, act_bytes=act_bytes,
                                                norm_stat_bytes=norm_stat_bytes, q_latent=self.q_latent)
        return inside, latents
