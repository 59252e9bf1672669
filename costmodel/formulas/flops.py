"""FLOPs of the matmuls (2 FLOPs per multiply-add), forward and backward.

Counted as torch.utils.flop_counter.FlopCounterMode counts: matrix products only; norms,
activations and softmax are elementwise and left out.
"""

from __future__ import annotations


def matmul_flops(*, tokens, fan_in, fan_out):
    """Forward FLOPs of a linear layer: 2 T d_in d_out (one multiply and one add per weight and token)."""
    return 2 * tokens * fan_in * fan_out


def ffn_forward_flops_per_token(*, d_model, d_ff, layers, gated=False):
    """Forward FLOPs per token of the FFN stack: 2P = (2 + gated) 2 D F L (XXL: 4 D F L).

    Source: Scaling Book training chapter, MLP forward 4BDF per layer (B tokens).
    """
    matrices = 3 if gated else 2
    return layers * matrices * matmul_flops(tokens=1, fan_in=d_model, fan_out=d_ff)


def ffn_backward_flops_per_token(*, d_model, d_ff, layers, gated=False, input_requires_grad=False):
    """Backward FLOPs per token: 2 x forward, less the first layer's input gradient if nobody needs it.

    Backward = (2 + gated) 4 D F L - [input needs no grad] (1 + gated) 2 D F.
    Source: Scaling Book training chapter (backward 8BDF per layer: weight and input gradients);
    autograd skips the input-gradient matmul of the first layer when the input needs no gradient.
    """
    full = 2 * ffn_forward_flops_per_token(d_model=d_model, d_ff=d_ff, layers=layers, gated=gated)
    first_layer_inputs = 2 if gated else 1  # matrices that read the stack's input
    skipped = 0 if input_requires_grad else first_layer_inputs * matmul_flops(tokens=1, fan_in=d_model, fan_out=d_ff)
    return full - skipped


def attention_score_flops_per_token(*, seq_len, heads, head_dim):
    """Forward FLOPs per token of Q K^T and softmax(.) V: 4 s a d_h (full s x s, no causal halving).

    Source: Narayanan et al. 2021, arXiv:2104.04473, Sec. 5.1 (the 4 b s^2 h term per layer is
    2 b s^2 h for Q K^T plus 2 b s^2 h for the product with V); FlopCounterMode counts the same.
    """
    return 2 * 2 * seq_len * heads * head_dim


def attention_value_flops_per_token(*, seq_len, heads, v_head_dim):
    """Of the attention core, the product with V: 2 s a d_v per token (half of 4 s a d_h when d_v = d_h)."""
    return 2 * seq_len * heads * v_head_dim


def attention_forward_flops_per_token(*, hidden, heads, kv_heads, head_dim, seq_len):
    """Forward FLOPs per token of one attention: 2 x its projections' weights + 4 s a d_h."""
    projections = hidden * head_dim * (2 * heads + 2 * kv_heads)
    return 2 * projections + attention_score_flops_per_token(seq_len=seq_len, heads=heads, head_dim=head_dim)


def mla_attention_forward_flops_per_token(*, hidden, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim,
                                          qk_rope_head_dim, v_head_dim, seq_len, q_latent=True):
    """Forward FLOPs per token of multi-head latent attention: 2 x its projection weights (the latent
    norms' weights are elementwise: not counted) + 2 s a (d_h + d_h^R) for Q K^T + 2 s a d_v for A V.
    Source: arXiv:2405.04434, Sec. 2.1.2-2.1.3 (training runs the up projections explicitly)."""
    qk = qk_nope_head_dim + qk_rope_head_dim
    queries = hidden * q_lora_rank + q_lora_rank * heads * qk if q_latent else hidden * heads * qk
    keys_values = hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank * heads * (qk_nope_head_dim + v_head_dim)
    projections = queries + keys_values + heads * v_head_dim * hidden
    return 2 * projections + mla_attention_score_flops_per_token(seq_len=seq_len, heads=heads, qk_head_dim=qk,
                                                                 v_head_dim=v_head_dim)


def mla_attention_score_flops_per_token(*, seq_len, heads, qk_head_dim, v_head_dim):
    """Q K^T over the query/key width and A V over the value width: 2 s a (d_h + d_h^R) + 2 s a d_v
    (4 s a d_h when the widths are equal, as in :func:`attention_score_flops_per_token`)."""
    return 2 * seq_len * heads * (qk_head_dim + v_head_dim)


def mlp_forward_flops_per_token(*, hidden, ffn_hidden, gated):
    """Forward FLOPs per token of a dense MLP: 2 x its (2 + gated) D F weights."""
    return 2 * (3 if gated else 2) * hidden * ffn_hidden


def transformer_layer_forward_flops_per_token(*, hidden, ffn_hidden, heads, kv_heads, head_dim, seq_len, gated):
    """Forward FLOPs per token of one block: 2 x its matmul weights + 4 s a d_h for attention."""
    return (attention_forward_flops_per_token(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                                              seq_len=seq_len)
            + mlp_forward_flops_per_token(hidden=hidden, ffn_hidden=ffn_hidden, gated=gated))


def moe_mlp_forward_flops_per_token(*, hidden, experts, top_k, expert_ffn_hidden, shared_ffn_hidden, gated,
                                    shared_gate=False):
    """Forward FLOPs per token of an MoE layer's MLP: the router's 2 D E, k_e experts of width F_e,
    the shared experts of width F_s (and Qwen2-MoE's 2 D gate).

    (2 + gated) 2 D (k_e F_e + F_s) + 2 D E (+ 2 D). A token runs only the experts it is routed to,
    so the count is the model's 'active' FLOPs (Fedus et al. 2021, arXiv:2101.03961, Sec. 2: FLOPs per
    token are independent of the number of experts); padding to a capacity is hardware FLOPs (below).
    """
    matrices = 3 if gated else 2
    experts_and_shared = matrices * (top_k * matmul_flops(tokens=1, fan_in=hidden, fan_out=expert_ffn_hidden)
                                     + matmul_flops(tokens=1, fan_in=hidden, fan_out=shared_ffn_hidden))
    gate = matmul_flops(tokens=1, fan_in=hidden, fan_out=1) if shared_gate else 0
    return matmul_flops(tokens=1, fan_in=hidden, fan_out=experts) + experts_and_shared + gate


def capacity_padding_flops_per_token(*, hidden, top_k, expert_ffn_hidden, gated, capacity_factor):
    """Forward FLOPs per token an MoE layer runs on padding: an expert computes its whole capacity
    c T k_e / E whether or not tokens fill it, (c - 1) of the routed work on average.

    Source: Fedus et al. 2021, arXiv:2101.03961, Sec. 2.2 (expert capacity = c x tokens per batch / experts).
    """
    matrices = 3 if gated else 2
    return (capacity_factor - 1) * top_k * matrices * matmul_flops(tokens=1, fan_in=hidden, fan_out=expert_ffn_hidden)


def transformer_forward_flops_per_token(
    *, hidden, ffn_hidden, layers, heads, kv_heads, head_dim, vocab, seq_len, gated
):
    """Forward FLOPs per token: L x the block's + 2 V D for the logits.

    Embedding lookups are gathers (no FLOPs); the logits matmul counts even with tied embeddings.
    """
    per_layer = transformer_layer_forward_flops_per_token(
        hidden=hidden, ffn_hidden=ffn_hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        seq_len=seq_len, gated=gated)
    return layers * per_layer + matmul_flops(tokens=1, fan_in=hidden, fan_out=vocab)


def transformer_backward_flops_per_token(
    *, hidden, ffn_hidden, layers, heads, kv_heads, head_dim, vocab, seq_len, gated
):
    """Backward FLOPs per token: 2 x forward (gradients for inputs and weights of every matmul).

    The first block's input comes from the embedding, which is trained, so nothing is skipped.
    Source: Kaplan et al. 2020, arXiv:2001.08361, Sec. 2.1 (backward = 2 x forward).
    """
    return 2 * transformer_forward_flops_per_token(
        hidden=hidden, ffn_hidden=ffn_hidden, layers=layers, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, vocab=vocab, seq_len=seq_len, gated=gated)


def matmul_intensity(*, rows, cols, depth, element_bytes):
    """FLOP per byte of one GEMM C[m, n] = A[m, k] B[k, n]: I = 2 m n k / (b (m k + k n + m n)).

    Source: the Scaling Book, "All About Rooflines" (a bf16 [B, D] x [D, F] matmul: 2BDF / (2BD + 2DF + 2BF)).
    Assumes:
    - each operand read from HBM once and the result written once (tiles reuse on chip);
    - one element size b for all three.
    """
    return 2 * rows * cols * depth / (element_bytes * (rows * depth + depth * cols + rows * cols))


def flash_attention_hbm_bytes_per_token(*, heads, kv_heads, head_dim, element_bytes, rerun=0):
    """Bytes flash attention moves over HBM per token and layer, each operand read and each result written
    once per pass (a lower bound: the kernel streams K and V once per query tile): forward reads Q, K, V and
    writes O, ``(2 a + 2 k) d``; backward reads Q, K, V, O, dO and writes dQ, dK, dV, ``(4 a + 4 k) d``; a
    rerun forward (recomputation, ``rerun`` of them) moves the forward's again. Source: the kernels'
    signatures (Dao 2023, arXiv:2307.08691, Algorithms 1-2; the log-sum-exp rows, a per query head, left out).
    """
    forward = (2 * heads + 2 * kv_heads) * head_dim
    return element_bytes * (forward * (1 + rerun) + (4 * heads + 4 * kv_heads) * head_dim)

