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
