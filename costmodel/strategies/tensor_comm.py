"""Collectives of the tensor-parallel axis per step (Megatron column/row split).

Source: Shoeybi et al. 2019, arXiv:1909.08053, Sec. 3 (the f and g operators: one all-reduce in
forward and one in backward per column/row pair); Korthikanti et al. 2022, arXiv:2205.05198,
Sec. 4.2.2 (with sequence parallelism each all-reduce becomes reduce-scatter + all-gather).
"""

from __future__ import annotations

from costmodel.strategies.collective import Collective


def tensor_collectives(*, tokens, width, layers, tp, act_bytes, sp: bool, pairs_per_layer: int = 1,
                       first_input_grad: bool = True) -> list[Collective]:
    """TP collectives per step on ``tokens`` tokens of ``width`` (= D) activations.

    Each column/row pair (the FFN block; attention and MLP in a transformer layer) all-reduces its
    T x D output in forward and its input gradient in backward; with sequence parallelism, an
    all-gather before and a reduce-scatter after, mirrored in backward. S = b_act T D each.
    When the first pair's input needs no gradient (an FFN stack fed with data), autograd computes
    none and that backward collective does not happen (checked in tests/test_torch_distributed.py).
    """
    calls = layers * pairs_per_layer
    grad_calls = calls if first_input_grad else calls - 1
    size = act_bytes * tokens * width
    if not sp:
        return [
            Collective("all-reduce", "tp", "block outputs", "forward", tp, calls, size),
            Collective("all-reduce", "tp", "input gradients", "backward", tp, grad_calls, size),
        ]
    return [
        Collective("all-gather", "tp", "sequence-sharded inputs", "forward", tp, calls, size),
        Collective("reduce-scatter", "tp", "block outputs", "forward", tp, calls, size),
        Collective("all-gather", "tp", "output gradients", "backward", tp, calls, size),
        Collective("reduce-scatter", "tp", "input gradients", "backward", tp, grad_calls, size),
    ]


def model_end_collectives(*, tokens, width, tp, act_bytes, sp: bool, ends: str, first: bool, last: bool,
                          norms: int, grad_bytes) -> list[Collective]:
    """TP traffic outside the blocks: the embedding (first stage), the output layer and loss (last
    stage), and with SP the norms' weight gradients.

    Vocabulary-parallel ends (Shoeybi et al. 2019, Sec. 3, 'input embedding ... parallelized along
    the vocabulary dimension'; with SP, Korthikanti et al. 2022, Sec. 4.2.2): the embedding's partial
    sums are all-reduced (SP: reduce-scattered to sequence shards) and the output layer's input
    gradient all-reduced (SP: its input all-gathered, its gradient reduce-scattered); the parallel
    cross-entropy all-reduces three fp32 values per token (max, sum of exponentials, target logit).
    Replicated ends move nothing without SP; with SP the output layer's input is all-gathered and the
    embedding's output gradient all-gathered. Under SP the norms' weight gradients are partial sums
    over the TP ranks: one all-reduce each before the optimizer step (Megatron's layernorm-grad
    all-reduce; torch's DTensor leaves them Partial and AdamW reduces them on every read).
    """
    size = act_bytes * tokens * width
    out = []
    if ends == "vocab-parallel":
        if first:
            op = "reduce-scatter" if sp else "all-reduce"
            out.append(Collective(op, "tp", "embedding output (vocabulary-parallel)", "forward", tp, 1, size))
            if sp:
                out.append(Collective("all-gather", "tp", "embedding output gradient", "backward", tp, 1, size))
        if last:
            if sp:
                out.append(Collective("all-gather", "tp", "output-layer input", "forward", tp, 1, size))
            out.append(Collective("reduce-scatter" if sp else "all-reduce", "tp", "output-layer input gradient",
                                  "backward", tp, 1, size))
            out.append(Collective("all-reduce", "tp", "parallel cross-entropy (max, sum, target)", "forward", tp,
                                  3, 4 * tokens))
    elif sp:
        if last:
            out.append(Collective("all-gather", "tp", "output-layer input", "forward", tp, 1, size))
        if first:
            out.append(Collective("all-gather", "tp", "embedding output gradient", "backward", tp, 1, size))
    if sp and norms:
        out.append(Collective("all-reduce", "tp", "norm weight gradients (partial under SP)", "optimizer", tp,
                              norms, grad_bytes * width))
    return out
