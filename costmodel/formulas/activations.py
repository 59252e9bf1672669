"""Activation bytes a transformer layer saves for backward, per token, from the tensors each op saves.

Per layer, in three groups (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1, generalised to
GQA, SwiGLU, no dropout and flash attention):

* outside the TP region (split over t only with sequence parallelism): the two norm inputs, the
  inputs of the QKV and first MLP matmuls, and the two dropout masks (1 byte per element);
* inside the TP region (split over t): Q, K, V, the attention output fed to the output projection,
  and the MLP's hidden tensors (GeLU: its input and the second matmul's input; SwiGLU: gate, up,
  SiLU(gate) and the product);
* the attention core (split over t; what selective recomputation drops): the softmax output, its
  dropout mask and dropout output (5 a s for GPT), or with flash attention only the output and the
  fp32 log-sum-exp.

GPT (LayerNorm, dropout, GeLU 4h MLP, MHA) gives Korthikanti's Table 2: sbh (34 + 5 a s / h) etc.
"""

from __future__ import annotations


def outside_tp_bytes_per_token(*, hidden, act_bytes, dropout, norm_stat_bytes=0, residual_bytes=2, qkv_inputs=1,
                               mlp_inputs=1, norm_inputs=2, norms=2):
    """Norm and matmul inputs outside the TP region: 2 b_r h for the norms' inputs, b_a h for each copy of
    a norm output a matmul saves (+ 2h of 1-byte dropout masks) (+ the two norms' per-token statistics).
    A parallel block (x + attn(n(x)) + mlp(n(x))) saves one norm input (``norm_inputs`` 1) and, with one
    norm (``norms`` 1), one statistic and one norm output for both matmuls (``mlp_inputs`` 0).

    Korthikanti Sec. 4.1: LayerNorms 4sbh, QKV input 2sbh, MLP input 2sbh, two dropout masks 2sbh
    (with 2-byte activations: 10sbh in all). Fused norm kernels also keep fp32 statistics per token:
    RMSNorm its rstd (4 B), LayerNorm mean and rstd (8 B); Korthikanti leaves them out
    (``norm_stat_bytes`` = 0). Under autocast (torch.autocast over fp32 weights) the residual stream
    is fp32 (``residual_bytes`` b_r = 4) and the norms' fp32 output is cast to bf16 once per matmul that
    reads it: ``qkv_inputs`` copies (3 for separate Q, K, V projections, 1 fused) and ``mlp_inputs``
    (2 for separate gate and up, 1 fused or GeLU); in low precision one tensor serves them all (1, 1).
    """
    masks = 2 * hidden if dropout else 0  # 1 byte per element each
    return (norm_inputs * residual_bytes * hidden + act_bytes * hidden * (qkv_inputs + mlp_inputs) + masks
            + norms * norm_stat_bytes)


def inside_tp_bytes_per_token(*, hidden, ffn_hidden, heads, kv_heads, head_dim, act_bytes, gated,
                              fused_swiglu: bool = False):
    """Q, K, V, the output projection's input and the MLP hidden tensors (split over t).

    Attention: b_a d_h (a + 2 a_kv) for Q, K, V plus b_a a d_h for the projection input.
    MLP: :func:`mlp_hidden_bytes_per_token`. GPT (a_kv = a, a d_h = h, F = 4h): 4h + 2h... = 24h bytes (Korthikanti).
    """
    attention = act_bytes * head_dim * (heads + 2 * kv_heads) + act_bytes * heads * head_dim
    return attention + mlp_hidden_bytes_per_token(ffn_hidden=ffn_hidden, act_bytes=act_bytes, gated=gated,
                                                  fused_swiglu=fused_swiglu)


def mlp_hidden_bytes_per_token(*, ffn_hidden, act_bytes, gated, fused_swiglu: bool = False):
    """The MLP's hidden tensors one token leaves saved: GeLU its input and the second matmul's input (2F);
    SwiGLU in torch ops (SiLU(gate) * up) gate, up, SiLU(gate) and their product (4F); a fused SwiGLU that saves
    its input only and recomputes SiLU in backward (``fused_swiglu``: Megatron-core's bias_swiglu_impl, taken where
    bias_activation_fusion is set, as NeMo's Llama configs do) gate and up, and the product the second matmul saves
    (3F). Source: NVIDIA/Megatron-LM core/fusions/fused_bias_swiglu.py SwiGLUFunction (save_for_backward(input));
    measured in tests/test_torch_llama_activations.py.

        b_a F (4 | 3 | 2)"""
    return act_bytes * ffn_hidden * ((3 if fused_swiglu else 4) if gated else 2)


def qk_norm_bytes_per_token(*, heads, kv_heads, head_dim, act_bytes, norm_stat_bytes):
    """A per-head norm of each query and key head (Qwen3's q_norm, k_norm) saves its input, the projection's output
    (b_a d_h a queries and a_kv keys), and its statistic per head (a fused RMSNorm's fp32 rstd: 4 B); its output
    feeds RoPE, whose products save only cos and sin (split over t with the heads):

        (a + a_kv) (b_a d_h + s_n)"""
    return (heads + kv_heads) * (act_bytes * head_dim + norm_stat_bytes)


def fused_qkv_view_bytes_per_token(*, heads, kv_heads, head_dim, act_bytes):
    """With one fused QKV projection and flash attention, V is a view of the projection's output, and the
    kernel saves V as given: the whole Q K V storage stays alive, b_a (a + a_kv) d_h per token more than
    V alone (Q and K are saved after RoPE, which makes new tensors). Math attention's matmul saves its own
    re-laid copy of V, so the fused output is freed. Measured in tests/test_torch_autocast.py."""
    return act_bytes * (heads + kv_heads) * head_dim


def attention_core_bytes_per_token(*, heads, head_dim, seq_len, act_bytes, dropout, flash, eager=False,
                                   kv_heads=None):
    """What the attention core keeps (split over t; dropped by selective recomputation).

    Without flash: softmax output b_a a s, plus its dropout mask a s and output b_a a s (GPT: 5as).
    Flash attention keeps its output O and the fp32 log-sum-exp L (Dao et al. 2022, arXiv:2205.14135,
    Alg. 2); O is the very tensor the output projection saves (counted inside the TP region: the
    kernel lays it out so that the reshape is a view), so only 4a bytes are new (checked in
    tests/test_torch_llama_activations.py). ``head_dim`` and ``act_bytes`` matter without flash only.
    ``eager`` (Hugging Face's eager attention, flash off): K and V repeated to all a heads (repeat_kv),
    which the two matmuls save instead of the a_kv-head copies, + 2 b_a d_h (a - a_kv); and a softmax in
    fp32 cast back (softmax(..., dtype=float32).to(dtype)), whose fp32 output it saves, + 4 a s.
    Source: transformers' LlamaAttention eager_attention_forward; measured in
    tests/test_torch_llama_activations.py.
    """
    if flash:
        return 4 * heads
    dropped = (1 + act_bytes) * heads * seq_len if dropout else 0
    core = act_bytes * heads * seq_len + dropped
    if eager:
        core = core + 4 * heads * seq_len + 2 * act_bytes * head_dim * (heads - kv_heads)
    return core


def layer_input_bytes_per_token(*, hidden, act_bytes):
    """Full recomputation keeps only each layer's input: b h in the residual stream's dtype
    (Korthikanti Table 2: 2sbh; under autocast fp32, 4sbh)."""
    return act_bytes * hidden


def layer_activation_bytes_per_token(*, outside, inside, core, tp, sp, policy):
    """Per layer and token: outside/(t if SP) + inside/t + core/t, less what ``policy`` recomputes.

    policy 'none' keeps everything, 'selective' drops the attention core (Korthikanti Sec. 5).
    """
    kept_core = 0 if policy == "selective" else core
    return outside / (tp if sp else 1) + (inside + kept_core) / tp


def rerun_layer_bytes_per_token(*, whole, kept):
    """What a recomputed layer saves again during its backward, per token: its rerun forward repacks the tensors
    the layer saves without recomputation (``whole``) beyond those the policy kept (``kept``: full, its input;
    selective, all but the attention core; torchtitan's op, its kept matmul outputs and attention's), alive beside
    everything kept until its backward consumes them, one layer at a time. Source: torch.utils.checkpoint;
    measured in tests/test_torch_llama_activations.py (full and op, the rerun to the layer's end)."""
    return whole - kept


def output_layer_bytes_per_token(*, hidden, vocab, act_bytes, tp, norm_stat_bytes=0, residual_bytes=2, sp=False):
    """The last stage's extras: final norm input and logits matmul input b_a h each, the final norm's
    fp32 statistics (as every other norm's), fp32 logits 4V/t. Under sequence parallelism (``sp``) the final norm
    runs on the sequence shard and the output layer saves its input before the gather, as every column-parallel
    linear does (Megatron-core's LinearWithGradAccumulationAndAsyncCommunication saves the local input): all but
    the logits split over t, as the layers' norm inputs (Korthikanti Sec. 4.2.2).

    Korthikanti Sec. 4.1 ('output layer ... 4sbv/t for the fp32 cross-entropy'), norm input as above.
    The loss's targets (int64 token ids, 8 B per token) and its scalar weight are not counted, like the
    first stage's input ids (measured in tests/test_torch_llama_activations.py).
    """
    return ((residual_bytes + act_bytes) * hidden + norm_stat_bytes) / (tp if sp else 1) + 4 * vocab / tp


def routed_expert_bytes_per_token(*, hidden, top_k, expert_ffn_hidden, act_bytes, gated, tp, routed_factor, etp=None):
    """What an MoE layer's routed experts save per token on the busiest device: for each of the
    k_e f token copies it receives (f: capacity factor, or the load imbalance), the copy and the
    expert's output (saved by the product with its routing weight) b_a 2 D, the weight b_a, and the
    expert MLP's hidden tensors b_a 4 F_e / t (SwiGLU; GeLU 2: :func:`mlp_hidden_bytes_per_token`); and for each of its own k_e
    token copies, the two int64 indices that permute and unpermute it (16 k_e), and the router's int64
    top-k indices and their fp32 softmax (12 k_e): 28 k_e / t.

    Under expert TP t_e (``etp``; default t, with SP) each rank routes its sequence shard (/ t) and the
    received copies are gathered over the t_e ranks of the expert TP group: a rank keeps t_e / t of the
    copies with their D-wide tensors whole, and F_e splits t_e ways. The grouped implementation of tests/torch_moe.py (Megatron-core's routing: top-k of the
    logits, then a softmax over the k; Jiang et al. 2024, arXiv:2401.04088, Sec. 2.1) saves exactly
    these (tests/test_torch_moe.py). Inputs the router shares with the MLP norm are counted there.
    """
    etp = tp if etp is None else etp
    copies = top_k * routed_factor * etp / tp
    per_copy = act_bytes * (2 * hidden + 1) + mlp_hidden_bytes_per_token(
        ffn_hidden=expert_ffn_hidden, act_bytes=act_bytes, gated=gated) / etp
    return copies * per_copy + 28 * top_k / tp


def shared_gate_bytes_per_token(*, hidden, act_bytes, tp):
    """Qwen2-MoE's shared-expert gate sigmoid(x w) y: the product saves the sigmoid's output (b_a) and the
    shared experts' output y (b_a D, reduced over TP first, so split only by SP: / t)."""
    return act_bytes * (hidden + 1) / tp


def mla_attention_bytes_per_token(*, heads, qk_head_dim, v_head_dim, act_bytes):
    """Multi-head latent attention's tensors inside the TP region (split over t): Q and K, a (d_h + d_h^R)
    each (the shared rotary key copied to every head), V, a d_v, and the output projection's input, a d_v.
    The same four tensors as :func:`inside_tp_bytes_per_token`'s attention, at MLA's widths."""
    return act_bytes * heads * (2 * qk_head_dim + 2 * v_head_dim)


def mla_latent_bytes_per_token(*, q_lora_rank, kv_lora_rank, rope_head_dim, act_bytes, norm_stat_bytes,
                               q_latent=True):
    """MLA's latents (outside the TP region: the down projections are whole on every rank, so split
    over t only with SP): the query latent, saved by its norm, and normed, saved by the up projection,
    2 b_a d_c'; the key/value projection's output (d_c + d_h^R), whose latent part its norm saves, and the
    normed latent, saved by the up projection, b_a (2 d_c + d_h^R); each norm's statistics.
    Source: arXiv:2405.04434, Sec. 2.1.2-2.1.3 (c^Q, c^KV and k^R); the order of transformers'
    DeepseekV3Attention."""
    queries = 2 * act_bytes * q_lora_rank + norm_stat_bytes if q_latent else 0
    return queries + act_bytes * (2 * kv_lora_rank + rope_head_dim) + norm_stat_bytes
