"""A model as named widths (D, F, L, a, k, d_h, V, s) and structure, for every quantity the axes need.

The FFN stack of the XXL problem and a transformer share one shape: the stack is a transformer
with no attention, no norms and no embeddings (``attention`` false). Each per-model quantity is
written here once, as a method whose body calls the pure formulas; the widths may be numbers or
sympy symbols (``Shape.symbolic``), so the same code gives the CLI's numbers and the printed formulas.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from costmodel.formulas import activations as ac
from costmodel.formulas import flops as fl
from costmodel.formulas import memory as mem
from costmodel.formulas import params as pa
from costmodel.mathops import letter

#: the letters of the symbolic view, by field (Scaling Book: D, F, L; Korthikanti: a, s, V)
LETTERS = {"width": "D", "mlp_width": "F", "layers": "L", "heads": "a", "kv_heads": "k", "head_dim": "d_h",
           "vocab": "V", "seq_len": "s"}


@dataclass(frozen=True)
class Shape:
    """Widths (numbers or symbols) and structure (Python values) of one model."""

    name: str
    attention: bool  # False: the FFN stack (no attention, norms or embeddings)
    width: object  # D, the residual stream
    mlp_width: object  # F
    layers: object  # L
    gated: bool
    heads: object = 0  # a
    kv_heads: object = 0  # k
    head_dim: object = 0  # d_h
    vocab: object = 0  # V
    seq_len: object = 0  # s
    activation: str = "none"  # FFN stack's nonlinearity
    input_requires_grad: bool = True  # False: the stack is fed with data (XXL)
    bias: bool = False
    qkv_bias: bool = False
    out_bias: bool = False  # the attention output projection's bias without the MLP's (HF attention_bias)
    mlp_bias: bool = False  # the MLP's biases without the attention's (HF mlp_bias)
    layernorm: bool = False
    tied: bool = False
    learned_positions: int = 0  # rows of a learned position table (0 for RoPE)
    dropout: bool = False

    @classmethod
    def of(cls, model) -> "Shape":
        """The shape of a model spec (FFNStack or Transformer)."""
        if model.kind == "ffn":
            return cls(model.name, False, model.width, model.mlp_width, model.layers, model.gated,
                       activation=model.activation, input_requires_grad=model.input_requires_grad)
        return cls(model.name, True, model.width, model.mlp_width, model.layers, model.mlp == "swiglu",
                   heads=model.heads, kv_heads=model.kv_heads, head_dim=model.dim_per_head, vocab=model.vocab,
                   seq_len=model.seq_len, bias=model.bias, qkv_bias=model.qkv_bias or model.attention_bias,
                   out_bias=model.attention_bias, mlp_bias=model.mlp_bias,
                   layernorm=model.norm == "layernorm", tied=model.tied_embeddings,
                   learned_positions=model.max_position if model.position == "learned" else 0,
                   dropout=model.dropout)

    def values(self) -> dict:
        """Field -> value of each width :meth:`symbolic` writes as a letter (the FFN stack: D, F, L)."""
        fields = tuple(LETTERS) if self.attention else ("width", "mlp_width", "layers")
        return {f: getattr(self, f) for f in fields}

    def symbolic(self) -> "Shape":
        """The same shape with each width a positive integer symbol (D, F, L, ...)."""
        return replace(self, **{f: letter(LETTERS[f]) for f in self.values()})

    # ---- parameters -------------------------------------------------------------------------
    def _attn(self) -> dict:
        return dict(hidden=self.width, heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim)

    def norm_params(self):
        """One norm: D (RMSNorm) or 2 D (LayerNorm)."""
        return pa.norm_params(hidden=self.width, with_bias=self.layernorm)

    def block_params(self):
        """Parameters of one repeated block."""
        if not self.attention:
            return pa.ffn_block_params(d_model=self.width, d_ff=self.mlp_width, gated=self.gated)
        return pa.transformer_layer_params(**self._attn(), ffn_hidden=self.mlp_width, gated=self.gated,
                                           bias=self.bias, norm_bias=self.layernorm, qkv_bias=self.qkv_bias,
                                           out_bias=self.out_bias, mlp_bias=self.mlp_bias)

    def block_replicated_params(self):
        """Parameters of a block every TP rank keeps whole: two norms and the row-parallel biases."""
        if not self.attention:
            return 0
        row_biases = (self.bias or self.out_bias) + (self.bias or self.mlp_bias)  # attention-out, MLP-out
        return 2 * self.norm_params() + row_biases * self.width

    def embedding_params(self):
        """Token embedding table V D (0 for the FFN stack)."""
        return pa.embedding_params(vocab=self.vocab, hidden=self.width) if self.attention else 0

    def position_params(self):
        if not self.learned_positions:
            return 0
        return pa.position_params(max_position=self.learned_positions, hidden=self.width)

    def output_params(self):
        """Output projection V D (0 when tied, or for the FFN stack)."""
        return pa.output_params(vocab=self.vocab, hidden=self.width, tied=self.tied) if self.attention else 0

    def param_parts(self) -> dict:
        """Parameters by part; the parts sum to the total."""
        if not self.attention:
            return {"blocks": self.layers * self.block_params()}
        parts = {
            "embedding": self.embedding_params(), "position": self.position_params(),
            "attention": self.layers * pa.attention_params(**self._attn(), bias=self.bias, qkv_bias=self.qkv_bias,
                                                           out_bias=self.out_bias),
            "mlp": self.layers * pa.mlp_params(hidden=self.width, ffn_hidden=self.mlp_width, gated=self.gated,
                                               bias=self.bias or self.mlp_bias),
            "norms": (2 * self.layers + 1) * self.norm_params(),
            "output": self.output_params(),
        }
        return {name: count for name, count in parts.items() if not (isinstance(count, int) and count == 0)}

    def total_params(self):
        return sum(self.param_parts().values())

    def unsaved_first_layer_params(self):
        """Weights whose low-precision copy autograd does not save: the first matmuls of a stack fed with data."""
        if self.attention or self.input_requires_grad:
            return 0
        return (2 if self.gated else 1) * self.width * self.mlp_width

    def split_costs(self):
        """(c, c_o): what a compute-balanced pipeline split weighs a layer and the output layer by.

        nanotron's weights: 4 a d_h D + 3 F D per decoder layer (its matmul weights for MHA with a
        gated MLP), V D for the output layer (huggingface/nanotron@67c5ebb6 src/nanotron/models/llama.py
        L913-925). The FFN stack has no output layer: (its block's parameters, 0).
        """
        if not self.attention:
            return self.block_params(), 0
        mlp = (3 if self.gated else 2) * self.mlp_width * self.width
        return 4 * self.heads * self.head_dim * self.width + mlp, self.vocab * self.width

    # ---- FLOPs ------------------------------------------------------------------------------
    def layer_forward_flops_per_token(self, seq_len=None):
        if not self.attention:
            return fl.ffn_forward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=1, gated=self.gated)
        return fl.transformer_layer_forward_flops_per_token(
            **self._attn(), ffn_hidden=self.mlp_width, seq_len=self.seq_len if seq_len is None else seq_len,
            gated=self.gated)

    def _transformer_flops(self, seq_len) -> dict:
        return dict(self._attn(), ffn_hidden=self.mlp_width, layers=self.layers, vocab=self.vocab,
                    seq_len=self.seq_len if seq_len is None else seq_len, gated=self.gated)

    def forward_flops_per_token(self, seq_len=None):
        """Forward matmul FLOPs per token."""
        if not self.attention:
            return fl.ffn_forward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=self.layers,
                                                  gated=self.gated)
        return fl.transformer_forward_flops_per_token(**self._transformer_flops(seq_len))

    def backward_flops_per_token(self, seq_len=None):
        """Backward matmul FLOPs per token."""
        if not self.attention:
            return fl.ffn_backward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=self.layers,
                                                   gated=self.gated, input_requires_grad=self.input_requires_grad)
        return fl.transformer_backward_flops_per_token(**self._transformer_flops(seq_len))

    def attention_score_flops_per_token(self, seq_len=None):
        """Q K^T and A V per layer and token (0 for the FFN stack)."""
        if not self.attention:
            return 0
        return fl.attention_score_flops_per_token(seq_len=self.seq_len if seq_len is None else seq_len,
                                                  heads=self.heads, head_dim=self.head_dim)

    # ---- activations ------------------------------------------------------------------------
    def layer_activation_bytes_per_token(self, *, act_bytes, tp, sp: bool, selective: bool, flash: bool,
                                         norm_stats: bool, eager: bool = False):
        """One layer keeping everything (less the attention core under selective recompute), per token."""
        if not self.attention:
            return act_bytes * mem.ffn_activation_elements_per_token(
                d_model=self.width, d_ff=self.mlp_width, layers=1, gated=self.gated, activation=self.activation,
                tp=tp, sp=sp)
        stats = (8 if self.layernorm else 4) if norm_stats else 0  # fp32 rstd (LayerNorm: and mean)
        outside = ac.outside_tp_bytes_per_token(hidden=self.width, act_bytes=act_bytes, dropout=self.dropout,
                                                norm_stat_bytes=stats)
        inside = ac.inside_tp_bytes_per_token(**self._attn(), ffn_hidden=self.mlp_width, act_bytes=act_bytes,
                                              gated=self.gated)
        core = ac.attention_core_bytes_per_token(heads=self.heads, head_dim=self.head_dim, seq_len=self.seq_len,
                                                 act_bytes=act_bytes, dropout=self.dropout, flash=flash,
                                                 eager=eager, kv_heads=self.kv_heads)
        return ac.layer_activation_bytes_per_token(outside=outside, inside=inside, core=core, tp=tp, sp=sp,
                                                   policy="selective" if selective else "none")

    def layer_input_bytes_per_token(self, *, act_bytes, tp, sp: bool):
        """A fully recomputed layer keeps its input only (split over t with SP)."""
        return ac.layer_input_bytes_per_token(hidden=self.width, act_bytes=act_bytes) / (tp if sp else 1)

    def first_stage_extra_bytes_per_token(self, *, act_bytes, autocast: bool):
        """The FFN stack's fp32 input cast once per matmul that reads it (autocast only)."""
        if self.attention or not autocast:
            return 0
        return act_bytes * mem.autocast_input_cast_elements_per_token(d_model=self.width, gated=self.gated)

    def last_stage_extra_bytes_per_token(self, *, act_bytes, tp, norm_stats: bool = True):
        """The output layer's extras on the last stage (final norm input and statistics, logits input,
        fp32 logits / t)."""
        if not self.attention:
            return 0
        stats = (8 if self.layernorm else 4) if norm_stats else 0
        return ac.output_layer_bytes_per_token(hidden=self.width, vocab=self.vocab, act_bytes=act_bytes, tp=tp,
                                               norm_stat_bytes=stats)
