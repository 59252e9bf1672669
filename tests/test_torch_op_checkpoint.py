"""torchtitan's per-op selective activation checkpointing (``--recompute op``) in real torch (bf16, CPU), exact.

The block is torchtitan's Llama block in eager PyTorch (tests/torch_eager.py: separate q, k, v, complex RoPE,
repeat_kv, SDPA, SwiGLU) with its pre-2025 RMSNorm (x.float() * rsqrt(mean(x^2) + eps), cast back, times the
weight), and a variant with one fused QKV and one fused gate-up matmul. It runs under
torch.utils.checkpoint(use_reentrant=False, context_fn=...) with torchtitan's policy (tests/torch_sac.py: every op
on the save list is kept but every second aten.mm; the rest reruns). Under TP and SP the collectives it reruns
are checked in tests/test_torch_distributed_llama.py (cases *-op).

Measured:

* kept bytes: tests/live_bytes.py counts the storages made inside the forward that are still alive after it
  (the policy's cache; autograd keeps only placeholders under non-reentrant checkpointing), less the block's
  output, plus the block input the checkpoint holds;
* rerun FLOPs: a dispatch mode below the policy's counts every aten.mm run in backward (a kept output is
  returned from the cache and never reaches it); less backward's own matmuls (2 x forward), that is the rerun.
  (FlopCounterMode cannot be used here: under it the rerun of torch's own rms_norm issues one more aten.view
  than the forward did and the policy's cache refuses it.)

Expected: costmodel's stage wiring (one layer's bytes as the difference of a 2- and a 1-layer model) and
costmodel.cost.flops.recompute_flops_per_token, both from formulas/op_checkpoint.py.
"""

import pytest

pytest.importorskip("torch", reason="the PyTorch cross-checks need torch: pip install torch==2.13.0 (the README's test command)")
import torch
import torch.nn.functional as F
from live_bytes import LiveBytes
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint
from torch_eager import TitanBlock as Block
from torch_eager import apply_rotary_emb, repeat_kv, rope_angles
from torch_sac import context_fn

from costmodel.cost.flops import recompute_flops_per_token
from costmodel.cost.point import Point
from costmodel.cost.shape import Shape
from costmodel.specs.layout import Layout
from costmodel.specs.load import load_recipe
from costmodel.specs.model import Transformer
import costs

D, HEADS, KV_HEADS, FFN, BATCH, SEQ = 64, 4, 2, 176, 2, 12
TOKENS = BATCH * SEQ
class FusedBlock(Block):
    """The same block with one QKV matmul and one gate-up matmul (4 matmuls: qkv, o, gate-up, down)."""

    def __init__(self):
        super().__init__(D, HEADS, KV_HEADS, FFN)
        dh = D // HEADS
        self.wqkv = torch.nn.Linear(D, (HEADS + 2 * KV_HEADS) * dh, bias=False, dtype=torch.bfloat16)
        self.w13 = torch.nn.Linear(D, 2 * FFN, bias=False, dtype=torch.bfloat16)
        del self.wq, self.wk, self.wv, self.w1, self.w3

    def attention(self, x, freqs_cis):
        bs, seqlen, _ = x.shape
        dh = D // HEADS
        xq, xk, xv = (t.reshape(bs, seqlen, -1, dh) for t in self.wqkv(x).split([HEADS * dh, KV_HEADS * dh,
                                                                                 KV_HEADS * dh], dim=-1))
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = repeat_kv(xk, HEADS // KV_HEADS), repeat_kv(xv, HEADS // KV_HEADS)
        output = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                                is_causal=True)
        return self.wo(output.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    def feed_forward(self, x):
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


def spec(layers=1, fused=False):
    return Transformer(name="tiny-titan", hidden=D, ffn_hidden=FFN, layers=layers, heads=HEADS, kv_heads=KV_HEADS,
                       head_dim=D // HEADS, vocab=100, seq_len=SEQ, fused_projections=fused)


class MatmulFlops(TorchDispatchMode):
    """2 m k n of every aten.mm that runs."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func == torch.ops.aten.mm.default:
            self.flops += 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
        return func(*args, **(kwargs or {}))


def run(block, early_stop: bool):
    """(kept bytes after forward, FLOPs of the matmuls run in backward) of one checkpointed block."""
    freqs = rope_angles(SEQ, D // HEADS)
    x = torch.randn(BATCH, SEQ, D, dtype=torch.bfloat16, requires_grad=True)
    with LiveBytes() as live:
        out = checkpoint(block, x, freqs, use_reentrant=False, context_fn=context_fn, preserve_rng_state=False,
                         early_stop=early_stop)
    kept = live.live - out.untyped_storage().nbytes() + x.untyped_storage().nbytes()
    with MatmulFlops() as counter:
        out.float().sum().backward()
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in block.parameters())
    return kept, counter.flops


def expected_layer_bytes(fused):
    """One layer's kept bytes through the stage wiring: a 2-layer model less a 1-layer one (bf16 weights)."""
    recipe, layout = load_recipe("megatron"), Layout(recompute="op", tokens=TOKENS, seq=SEQ)
    two, one = (costs.memory(spec(n, fused), recipe, layout).activation_bytes_per_token for n in (2, 1))
    return two - one


def backward_matmul_flops(block):
    """Backward's own matmuls: an input and a weight gradient per forward matmul, 2 x its FLOPs."""
    return sum(2 * 2 * TOKENS * m.in_features * m.out_features for m in block.modules()
               if isinstance(m, torch.nn.Linear))


@pytest.mark.parametrize("early_stop", [True, False], ids=["early-stop", "to-the-end"])
@pytest.mark.parametrize("fused", [False, True], ids=["q-k-v", "fused-qkv"])
def test_op_policy_keeps_and_reruns_what_the_formula_says(fused, early_stop):
    """Separate projections keep q, v, gate, down and attention's output + log-sum-exp (with the input), and
    rerun k, o and up; fused ones keep qkv and gate-up and rerun o, and down too when the rerun goes to the block's
    end (torchtitan's early_stop=False: cost4d's --checkpoint reentrant; torch's default early stop:
    non-reentrant)."""
    torch.manual_seed(0)
    block = FusedBlock() if fused else Block(D, HEADS, KV_HEADS, FFN)
    kept, backward_flops = run(block, early_stop)
    assert kept == TOKENS * expected_layer_bytes(fused)
    rerun = backward_flops - backward_matmul_flops(block)
    flavour = "non-reentrant" if early_stop else "reentrant"
    assert rerun == TOKENS * recompute_flops_per_token(Shape.of(spec(1, fused)), Point(recompute="op", checkpoint=flavour))
    dh = D // HEADS
    by_hand = 2 * D * (KV_HEADS * dh) + 2 * HEADS * dh * D + 2 * D * FFN  # k, o, up
    fused_by_hand = 2 * HEADS * dh * D + (0 if early_stop else 2 * FFN * D)  # o (and down)
    assert rerun == TOKENS * (fused_by_hand if fused else by_hand)
