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


def transformer_layer_forward_flops_per_token(*, hidden, ffn_hidden, heads, kv_heads, head_dim, seq_len, gated):
    """Forward FLOPs per token of one block: 2 x its matmul weights + 4 s a d_h for attention."""
    projections = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = (3 if gated else 2) * hidden * ffn_hidden
    return 2 * (projections + mlp) + attention_score_flops_per_token(seq_len=seq_len, heads=heads, head_dim=head_dim)


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
