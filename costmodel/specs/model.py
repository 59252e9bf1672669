"""Model specs: the FFN stack of the XXL problem and a Llama/GPT-style decoder-only transformer."""


from typing import Annotated, Literal

from pydantic import model_validator

from costmodel.inputs import bounds
from costmodel.specs.base import Name, Spec, Text, count, field

Width = count(bounds.WIDTH)


class FFNStack(Spec):
    """L blocks of linear layers D -> F -> D, nothing else (CS336 A2 'communication_accounting').

    Without ``gated`` a block is two matrices (W_in: D x F, W_out: F x D). With ``gated`` a third
    D x F matrix multiplies in elementwise (GLU/SwiGLU style).
    """

    kind: Literal["ffn"] = "ffn"
    name: Name = field(description="short name used on the command line")
    description: Text = ""
    d_model: Width = field(description="D, width of the residual stream (elements)")
    d_ff: Width = field(description="F, hidden width of each block (elements)")
    layers: count(bounds.LAYERS) = field(description="L, number of blocks")
    gated: bool = field(False, description="third D x F matrix, multiplied in elementwise (GLU)")
    activation: Literal["none", "relu", "gelu", "silu"] = field(
        "none", description="nonlinearity between the matrices; XXL has none")
    input_requires_grad: bool = field(
        False,
        description="whether the stack's input needs a gradient (true when something trainable "
        "sits before it). When false, as for XXL, autograd skips the first layer's "
        "input-gradient matmul and does not save that layer's weight copy.")
    source: Text = field("", description="where the numbers come from")

    @property
    def width(self) -> int:
        """D, the residual stream's width (the name every model shares)."""
        return self.d_model

    @property
    def mlp_width(self) -> int:
        """F, the MLP's hidden width (the name every model shares)."""
        return self.d_ff


class MoE(Spec):
    """Mixture-of-experts MLPs: each MoE layer's MLP is a router and E expert MLPs, of which each
    token uses k (top-k routing), plus shared experts every token uses.

    Expert MLPs have the model's MLP kind (SwiGLU or GeLU) and width ``expert_ffn_hidden``. The first
    ``dense_layers`` layers keep a dense MLP of ``ffn_hidden`` (DeepSeek-V3's first_k_dense_replace).
    Sources: Shazeer et al. 2017, arXiv:1701.06538 (top-k gating); Fedus et al. 2021,
    arXiv:2101.03961 (capacity factor); Jiang et al. 2024, arXiv:2401.04088 (Mixtral: 8 experts, top-2);
    Dai et al. 2024, arXiv:2401.06066 (DeepSeekMoE: shared experts).
    """

    experts: count(bounds.EXPERTS) = field(description="E, routed experts per MoE layer")
    top_k: count(bounds.EXPERTS) = field(description="k, routed experts each token uses")
    expert_ffn_hidden: Width = field(description="F_e, hidden width of one routed expert's MLP (elements)")
    shared_ffn_hidden: Annotated[int, field(ge=0, le=bounds.WIDTH)] = field(
        0, description="F_s, hidden width of the shared experts together (one MLP every token uses; 0: none)")
    shared_gate: bool = field(False, description="a D -> 1 sigmoid gate scales the shared experts' output (Qwen2-MoE)")
    dense_layers: Annotated[int, field(ge=0, le=bounds.LAYERS)] = field(
        0, description="the first layers keep a dense MLP of ffn_hidden (DeepSeek-V3: 3)")
    capacity_factor: Annotated[float, field(ge=1, le=1024)] | None = field(
        None, description="tokens an expert takes, as a multiple of its even share T k / E; the rest are dropped "
        "and short experts padded (Fedus et al. 2021). None: dropless (Mixtral, DeepSeek-V3)")

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.top_k > self.experts:
            raise ValueError(f"top_k={self.top_k} is more than experts={self.experts}")
        return self


class MLA(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values projected down to latents,
    normed, and up to the heads; each head's query and key are a non-rotary part and a rotary part, the
    rotary key shared by all heads. Source: DeepSeek-AI 2024, arXiv:2405.04434 (DeepSeek-V2), Sec. 2.1.2-2.1.3."""

    q_lora_rank: Annotated[int, field(ge=0, le=bounds.WIDTH)] = field(
        description="d_c', the query latent (0: queries projected from D directly)")
    kv_lora_rank: Width = field(description="d_c, the key/value latent")
    qk_nope_head_dim: Width = field(description="d_h, each head's non-rotary query/key width")
    qk_rope_head_dim: Width = field(description="d_h^R, each head's rotary query/key width (the key's is shared)")
    v_head_dim: Width = field(description="each head's value width")


class Transformer(Spec):
    """Decoder-only transformer: Llama style (RMSNorm, SwiGLU, RoPE, GQA) or GPT style; MoE MLPs optional."""

    kind: Literal["transformer"] = "transformer"
    name: Name = field(description="short name used on the command line")
    description: Text = ""
    hidden: Width = field(description="D = h, width of the residual stream (elements)")
    ffn_hidden: Width = field(description="F, MLP hidden width (elements)")
    layers: count(bounds.LAYERS) = field(description="L, number of transformer blocks")
    heads: count(bounds.HEADS) = field(description="a, query heads")
    kv_heads: count(bounds.HEADS) = field(description="key/value heads (GQA); equal to heads for MHA")
    head_dim: Width | None = field(
        None, description="elements per head; default hidden / heads")
    vocab: count(bounds.VOCAB) = field(description="V, vocabulary size (tokens)")
    tied_embeddings: bool = field(False, description="output projection shares the embedding matrix")
    mlp: Literal["swiglu", "gelu"] = field("swiglu", description="MLP: SwiGLU (3 matrices) or GeLU (2)")
    norm: Literal["rmsnorm", "layernorm"] = field(
        "rmsnorm", description="RMSNorm (weight only) or LayerNorm (weight and bias)")
    bias: bool = field(False, description="linear layers carry biases (GPT-2/3 do, Llama does not)")
    qkv_bias: bool = field(False, description="only the Q, K, V projections carry biases (Qwen2)")
    attention_bias: bool = field(False, description="Q, K, V and the output projection carry biases, the MLP "
                                 "not (Hugging Face Llama/Mistral attention_bias)")
    mlp_bias: bool = field(False, description="the MLP's projections carry biases (Hugging Face Llama mlp_bias)")
    position: Literal["rope", "learned"] = field(
        "rope", description="rotary (no parameters) or learned absolute position embeddings")
    max_position: count(bounds.SEQUENCE) | None = field(
        None, description="positions of a learned position table (tokens); needed for 'learned'")
    seq_len: count(bounds.SEQUENCE) = field(description="s, training sequence length (tokens)")
    dropout: bool = field(False, description="dropout after attention and MLP (GPT); Llama trains without")
    qk_norm: bool = field(False, description="RMSNorm of d_h weights on each query and key head (Qwen3)")
    fused_projections: bool = field(
        False, description="Q, K, V computed by one matmul and gate, up by one (Megatron's linear_qkv, linear_fc1); "
        "under autocast each reads one bf16 cast of the norm output instead of one per projection (Hugging Face "
        "models project separately)")
    block: Literal["sequential", "parallel", "parallel-two-norms"] = field(
        "sequential", description="how attention and MLP combine: sequential x + attn(n1(x)), then + mlp(n2(.)) "
        "(Llama, GPT); parallel x + attn(n(x)) + mlp(n(x)) with one norm (GPT-J, PaLM, Falcon-7B); "
        "parallel-two-norms x + attn(n1(x)) + mlp(n2(x)) (GPT-NeoX, Pythia, Falcon-40B)")
    moe: MoE | None = field(None, description="mixture-of-experts MLPs (None: every MLP dense)")
    mla: MLA | None = field(None, description="multi-head latent attention in place of GQA (heads and kv_heads "
                            "equal; head_dim unused)")
    source: Text = field("", description="where the numbers come from")

    @model_validator(mode="after")
    def _check_shapes(self) -> "Transformer":
        if self.block != "sequential" and (self.moe is not None or self.mla is not None):
            raise ValueError(f"block={self.block!r} with MoE or MLA is not modelled (no such model is known)")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise ValueError(f"moe.dense_layers={self.moe.dense_layers} leaves none of the {self.layers} layers MoE")
        if self.mla is not None and self.kv_heads != self.heads:
            raise ValueError(f"multi-head latent attention has a key and value per head: kv_heads={self.kv_heads} "
                             f"must equal heads={self.heads}")
        if self.head_dim is None and self.hidden % self.heads and self.mla is None:
            raise ValueError(f"hidden={self.hidden} is not divisible by heads={self.heads}; give head_dim")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}")
        if self.position == "learned" and self.max_position is None:
            raise ValueError("position='learned' needs max_position")
        return self

    @property
    def width(self) -> int:
        """D = h, the residual stream's width (the name every model shares)."""
        return self.hidden

    @property
    def mlp_width(self) -> int:
        """F, the MLP's hidden width (the name every model shares)."""
        return self.ffn_hidden

    @property
    def dim_per_head(self) -> int:
        """Elements per attention head's query and key (MLA: non-rotary + rotary)."""
        if self.mla is not None:
            return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
        return self.head_dim or self.hidden // self.heads

