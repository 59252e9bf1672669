"""Collectives of the context-parallel axis per step: ring attention or all-to-all (Ulysses).

Ring attention (Liu et al. 2023, arXiv:2310.01889): each of the c devices holds T/c tokens and passes
its K, V chunk around the ring, c - 1 hops per layer in forward; backward passes K, V again and their
gradients, 2 x forward. All-to-all (Jacobs et al. 2023, DeepSpeed-Ulysses, arXiv:2309.14509): Q, K, V
are re-sharded from sequence to heads before attention and the output back, four all-to-alls per layer
in forward and four in backward; each moves (c - 1)/c of the device's tensor.
"""

from __future__ import annotations

from costmodel.strategies.collective import Collective


def context_collectives(*, tokens, heads, kv_heads, head_dim, layers, cp, act_bytes, kind: str) -> list[Collective]:
    """CP collectives for ``tokens`` tokens per replica (each device holds tokens / cp)."""
    local = tokens / cp
    kv_chunk = act_bytes * local * 2 * kv_heads * head_dim  # K and V of the local tokens
    if kind == "ring":
        hops = layers * (cp - 1)
        return [
            Collective("send/recv", "cp", "K, V around the ring", "forward", cp, hops, kv_chunk),
            Collective("send/recv", "cp", "K, V and dK, dV around the ring", "backward", cp, hops, 2 * kv_chunk),
        ]
    q_or_out = act_bytes * local * heads * head_dim
    k_or_v = act_bytes * local * kv_heads * head_dim
    out = []
    for phase in ("forward", "backward"):
        out += [
            Collective("all-to-all", "cp", "Q and the output, sequence <-> heads", phase, cp, 2 * layers, q_or_out),
            Collective("all-to-all", "cp", "K and V, sequence -> heads", phase, cp, 2 * layers, k_or_v),
        ]
    return out
