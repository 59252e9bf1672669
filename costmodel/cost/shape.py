"""A model as named widths (D, F, L, a, k, d_h, V, s) and structure, for every quantity the axes need.

The FFN stack of the XXL problem and a transformer share one shape: the stack is a transformer
with no attention, no norms and no embeddings (``attention`` false). Each per-model quantity is
written here once, as a method whose body calls the pure formulas; the widths may be numbers or
sympy symbols (``Shape.symbolic``), so the same code gives the CLI's numbers and the printed formulas.
A mixture of experts' quantities are in ``shape_moe.py``, multi-head latent attention's in ``shape_mla.py``:
``Shape`` inherits them, and its quantities here call them where a model has either. The activations its
layers and stages save are in ``shape_activations.py``, inherited likewise.
"""

from __future__ import annotations

from dataclasses import replace

from costmodel.cost.shape_activations import Activations
from costmodel.cost.shape_mla import MLA_LETTERS, LatentAttention, mla_fields
from costmodel.cost.shape_moe import MOE_LETTERS, MixtureOfExperts, moe_fields
from costmodel.cost.shape_op import OpCheckpoint
from costmodel.formulas import flops as fl
from costmodel.formulas import params as pa
from costmodel.mathops import exact_div, exact_fraction, is_zero, letter
from costmodel.record import record

#: the letters of the symbolic view, by field (Scaling Book: D, F, L; Korthikanti: a, s, V)
LETTERS = {"width": "D", "mlp_width": "F", "layers": "L", "heads": "a", "kv_heads": "k", "head_dim": "d_h",
           "vocab": "V", "seq_len": "s"}
#: every field's letter (a mixture of experts' and multi-head latent attention's too)
ALL_LETTERS = {**LETTERS, **MOE_LETTERS, **MLA_LETTERS}


@record
class Shape(MixtureOfExperts, LatentAttention, OpCheckpoint, Activations):
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
    qk_norm: bool = False  # RMSNorm of d_h on each query and key head (Qwen3)
    fused: bool = False  # Q, K, V in one matmul, gate and up in one (one autocast cast of the norm output each)
    block: str = "sequential"  # sequential, parallel (one norm) or parallel-two-norms (specs.model.Transformer)
    # mixture of experts (experts 0: every MLP is dense)
    experts: object = 0  # E
    top_k: object = 0  # k_e
    expert_width: object = 0  # F_e
    shared_width: object = 0  # F_s, the shared experts together
    dense_layers: object = 0  # L_d, the first layers keep a dense MLP of F
    shared_gate: bool = False
    capacity_factor: float | None = None  # None: dropless
    # multi-head latent attention (kv_rank 0: GQA); head_dim is then the query/key width d_nope + d_r
    kv_rank: object = 0  # r_kv
    q_rank: object = 0  # r_q (0: queries projected from D directly)
    rope_dim: object = 0  # d_r
    v_head_dim: object = 0  # d_v

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
                   dropout=model.dropout, qk_norm=model.qk_norm, fused=model.fused_projections, block=model.block,
                   **moe_fields(model.moe), **mla_fields(model.mla))

    @property
    def value_dim(self):
        """Each head's value width (d_v for MLA; d_h otherwise)."""
        return self.v_head_dim if self.mla else self.head_dim

    @property
    def norms_per_layer(self) -> int:
        """Norms in a block: two, or one when attention and the MLP read the same norm (parallel)."""
        return 1 if self.block == "parallel" else 2

    @property
    def norm_inputs_per_layer(self) -> int:
        """Residual-stream tensors the block's norms save: x and x + attn(.) in a sequential block; x
        alone in a parallel one (two norms of the same x save one storage)."""
        return 2 if self.block == "sequential" else 1

    @property
    def tp_outputs_per_layer(self) -> int:
        """Row-parallel partial sums reduced per block: attention's and the MLP's, or their sum once in a
        parallel block (GPT-NeoX gpt_j_residual: self.reduce after attention + MLP)."""
        return 2 if self.block == "sequential" else 1

    def values(self) -> dict:
        """Field -> value of each width :meth:`symbolic` writes as a letter (the FFN stack: D, F, L)."""
        fields = tuple(LETTERS) if self.attention else ("width", "mlp_width", "layers")
        if self.moe:
            fields += tuple(f for f in MOE_LETTERS if not (f != "experts" and is_zero(getattr(self, f))))
        if self.mla:
            fields += tuple(f for f in MLA_LETTERS if not is_zero(getattr(self, f)))
        return {f: getattr(self, f) for f in fields}

    def symbolic(self) -> "Shape":
        """The same shape with each width a positive integer symbol (D, F, L, ...)."""
        exact = {} if self.capacity_factor is None else {"capacity_factor": exact_fraction(self.capacity_factor)}
        return replace(self, **exact, **{f: letter(ALL_LETTERS[f]) for f in self.values()})

    # ---- parameters -------------------------------------------------------------------------
    def _attn(self) -> dict:
        return dict(hidden=self.width, heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim)

    def norm_params(self):
        """One norm: D (RMSNorm) or 2 D (LayerNorm)."""
        return pa.norm_params(hidden=self.width, with_bias=self.layernorm)

    def attention_params(self):
        """One layer's attention projections (and Qwen3's per-head query and key norms)."""
        if self.mla:
            return self.mla_attention_params()
        out = pa.attention_params(**self._attn(), bias=self.bias, qkv_bias=self.qkv_bias, out_bias=self.out_bias)
        return out + (pa.qk_norm_params(head_dim=self.head_dim) if self.qk_norm else 0)

    def dense_mlp_params(self):
        """One dense MLP of width F."""
        return pa.mlp_params(hidden=self.width, ffn_hidden=self.mlp_width, gated=self.gated,
                             bias=self.bias or self.mlp_bias)

    def block_params(self):
        """Parameters of one repeated block (an MoE model's: an MoE layer)."""
        if not self.attention:
            return pa.ffn_block_params(d_model=self.width, d_ff=self.mlp_width, gated=self.gated)
        if self.moe:
            return self.attention_params() + sum(self.moe_parts().values()) + self.norms_per_layer * self.norm_params()
        return self.dense_block_params()

    def dense_block_params(self):
        """Parameters of a block with a dense MLP (every block of a dense model)."""
        if not self.attention:
            return self.block_params()
        return self.attention_params() + self.dense_mlp_params() + self.norms_per_layer * self.norm_params()

    def block_replicated_params(self, dense: bool = False):
        """Parameters of a block every TP rank keeps whole: its norms, the row-parallel biases, the
        per-head query and key norms; an MoE layer's (unless ``dense``) router and shared-expert gate too."""
        if not self.attention:
            return 0
        row_biases = (self.bias or self.out_bias) + (self.bias or self.mlp_bias)  # attention-out, MLP-out
        out = self.norms_per_layer * self.norm_params() + row_biases * self.width
        out = out + (pa.qk_norm_params(head_dim=self.head_dim) if self.qk_norm else 0)
        if self.mla:
            out = out + self.mla_replicated_params()
        if self.moe and not dense:
            out = out + self.moe_replicated_params()
        return out

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
            "attention": self.layers * self.attention_params(),
            "mlp": (self.layers - self.moe_layers) * self.dense_mlp_params(),
            **({name: self.moe_layers * count for name, count in self.moe_parts().items()} if self.moe else {}),
            "norms": (self.norms_per_layer * self.layers + 1) * self.norm_params(),
            "output": self.output_params(),
        }
        return {name: count for name, count in parts.items() if not is_zero(count)}

    def total_params(self):
        return sum(self.param_parts().values())

    def active_params(self):
        """Parameters one token uses: all but the routed experts it is not sent to (MoE papers'
        'activated parameters'; embeddings and the output layer included, as Mixtral's 12.9B counts them)."""
        return self.total_params() - self.inactive_params()

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
        if self.moe or self.mla:  # not a nanotron model: a layer's forward matmul weights
            return exact_div(self.layer_forward_flops_per_token(seq_len=0), 2), self.vocab * self.width
        mlp = (3 if self.gated else 2) * self.mlp_width * self.width
        return 4 * self.heads * self.head_dim * self.width + mlp, self.vocab * self.width

    # ---- FLOPs ------------------------------------------------------------------------------
    def attention_forward_flops_per_token(self, seq_len=None):
        """One layer's attention per token: projections and the score and value products."""
        seq = self.seq_len if seq_len is None else seq_len
        if self.mla:
            return self.mla_attention_forward_flops_per_token(seq)
        return fl.attention_forward_flops_per_token(**self._attn(), seq_len=seq)

    def layer_forward_flops_per_token(self, seq_len=None, dense: bool = False):
        """One repeated block per token (an MoE model's MoE layer; ``dense``: a layer with a dense MLP)."""
        if not self.attention:
            return fl.ffn_forward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=1, gated=self.gated)
        if not (self.moe or self.mla):
            return fl.transformer_layer_forward_flops_per_token(
                **self._attn(), ffn_hidden=self.mlp_width, seq_len=self.seq_len if seq_len is None else seq_len,
                gated=self.gated)
        mlp = (fl.mlp_forward_flops_per_token(hidden=self.width, ffn_hidden=self.mlp_width, gated=self.gated)
               if dense or not self.moe else self.moe_mlp_forward_flops_per_token())
        return self.attention_forward_flops_per_token(seq_len) + mlp

    def stage_forward_flops_per_token(self, layers, dense_layers, seq_len=None):
        """Forward FLOPs per token of ``layers`` blocks of which ``dense_layers`` have a dense MLP."""
        if not self.moe:
            return layers * self.layer_forward_flops_per_token(seq_len)
        return ((layers - dense_layers) * self.layer_forward_flops_per_token(seq_len)
                + dense_layers * self.layer_forward_flops_per_token(seq_len, dense=True))

    def output_forward_flops_per_token(self):
        """The output layer's logits per token: 2 V D (0 for the FFN stack)."""
        return fl.matmul_flops(tokens=1, fan_in=self.width, fan_out=self.vocab) if self.attention else 0

    def _transformer_flops(self, seq_len) -> dict:
        return dict(self._attn(), ffn_hidden=self.mlp_width, layers=self.layers, vocab=self.vocab,
                    seq_len=self.seq_len if seq_len is None else seq_len, gated=self.gated)

    def forward_flops_per_token(self, seq_len=None):
        """Forward matmul FLOPs per token (an MoE model's active ones)."""
        if not self.attention:
            return fl.ffn_forward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=self.layers,
                                                  gated=self.gated)
        if self.moe or self.mla:
            return (self.stage_forward_flops_per_token(self.layers, self.layers - self.moe_layers, seq_len)
                    + self.output_forward_flops_per_token())
        return fl.transformer_forward_flops_per_token(**self._transformer_flops(seq_len))

    def backward_flops_per_token(self, seq_len=None):
        """Backward matmul FLOPs per token (2 x forward for a transformer: every input is trained)."""
        if not self.attention:
            return fl.ffn_backward_flops_per_token(d_model=self.width, d_ff=self.mlp_width, layers=self.layers,
                                                   gated=self.gated, input_requires_grad=self.input_requires_grad)
        if self.moe or self.mla:
            return 2 * self.forward_flops_per_token(seq_len)
        return fl.transformer_backward_flops_per_token(**self._transformer_flops(seq_len))

    def attention_score_flops_per_token(self, seq_len=None):
        """Q K^T and A V per layer and token (0 for the FFN stack)."""
        if not self.attention:
            return 0
        seq = self.seq_len if seq_len is None else seq_len
        if self.mla:
            return self.mla_attention_score_flops_per_token(seq)
        return fl.attention_score_flops_per_token(seq_len=seq, heads=self.heads, head_dim=self.head_dim)
