"""One rank of an expert-parallel MoE forward and backward on gloo (CPU).

Started by tests/test_torch_moe.py, one process per rank:

    RANK=r WORLD_SIZE=n python tests/dist_moe_workers.py OUT_DIR STORE_FILE SPEC_JSON BATCH SEQ

SPEC_JSON is the costmodel ``Transformer`` (with ``moe``) whose shape the layers take; costmodel supplies
no expected number. Every rank holds E / n experts of each MoE layer (the same seed everywhere, so rank r
keeps experts r E/n ... of one common model) and the whole router and shared experts, and routes its
own BATCH x SEQ tokens. Per MoE layer (Megatron-core's MoEAlltoAllTokenDispatcher, in plain torch):

1. ``dist.all_gather_single`` of the rank's int64 copies per expert (E counts): the split sizes;
2. ``dist.all_to_all_single`` of the token copies, sorted by expert, to the experts' ranks (dispatch),
   and one of their routing weights (activation dtype); the received copies are regrouped by local
   expert with ``split`` / ``cat``, run through the experts and multiplied by their weights;
3. ``dist.all_to_all_single`` of the weighted outputs back (combine), scatter-added into the tokens.

``AllToAll`` is an autograd function whose backward sends the gradients the other way (Megatron's
``_AllToAll``), so backward issues one all-to-all per forward one: tokens, weights (the router is trained
through them) and outputs. Each call is logged by a process-wide wrapper of the two dist functions:
{"op", "phase", "what", "input_bytes", "output_bytes", "group"}.

Cases: ``balanced`` (token i -> experts i, i + 1 mod E) and ``imbalanced`` (even tokens -> experts 0, 1:
rank 0 receives 1.5 x the even share for 2 or 4 ranks and 4 experts). Per case the rank also records
the bytes one EP MoE MLP saves for backward (input and parameters left out, as in test_torch_moe.py),
the copies it receives, and the largest difference between its EP output and the whole MoE MLP run
locally on the same tokens. Writes OUT_DIR/rank<r>.json: {case: {...}}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch_llama import rms_norm, storage_bytes
from torch_models import SavedStorages
from torch_moe import fixed_route, moe_mlp

from costmodel.specs.model import Transformer

LOG = {"phase": "setup", "what": None, "records": [], "rerun": False}


def _logged(fn, op):
    def wrapper(output, input, *args, **kwargs):
        LOG["records"].append({"op": op, "phase": LOG["phase"], "what": LOG["what"], "input_bytes": input.nbytes,
                               "output_bytes": output.nbytes, "group": dist.get_world_size(kwargs.get("group")),
                               "rerun": LOG["rerun"]})
        return fn(output, input, *args, **kwargs)
    return wrapper


dist.all_to_all_single = _logged(dist.all_to_all_single, "all-to-all")
dist.all_gather_single = _logged(dist.all_gather_single, "all-gather")


def all_to_all(x, output_splits, input_splits, what):
    LOG["what"] = what
    out = x.new_empty((sum(output_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), output_splits, input_splits)
    return out


class AllToAll(torch.autograd.Function):
    """all_to_all_single forward; the gradients go back by the mirrored all_to_all_single."""

    @staticmethod
    def forward(ctx, x, output_splits, input_splits, what):
        ctx.splits, ctx.what = (output_splits, input_splits), what
        return all_to_all(x, output_splits, input_splits, what)

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        return all_to_all(grad, input_splits, output_splits, ctx.what), None, None, None


class ExpertParallelMoE(nn.Module):
    """An MoEMLP whose routed experts are spread over the ranks; router and shared experts on every rank."""

    def __init__(self, full):
        super().__init__()
        self.full = full
        rank, world = dist.get_rank(), dist.get_world_size()
        self.local = len(full.experts) // world  # experts per rank
        self.first = rank * self.local
        self.experts = full.experts[self.first:self.first + self.local]
        self.received = 0

    def forward(self, x, route=None):
        full, world, local = self.full, dist.get_world_size(), self.local
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        chosen, weights = full.route(x, route)
        order, token, counts = full.permutation(chosen)
        everyone = counts.new_empty(world * counts.numel())  # copies rank s sends to expert e, s-major
        dist.all_gather_single(everyone, counts)
        per_local = everyone.view(world, -1)[:, self.first:self.first + local]  # (source, local expert)
        send = counts.view(world, local).sum(1).tolist()
        recv = per_local.sum(1).tolist()
        self.received = sum(recv)

        xs = AllToAll.apply(x.index_select(0, token), recv, send, "tokens")
        ws = AllToAll.apply(weights.view(-1).index_select(0, order), recv, send, "weights")
        source_major = per_local.flatten().tolist()  # chunks as received: by source rank, then local expert
        expert_major = per_local.t().flatten().tolist()
        xs, ws = _regroup(xs, source_major, world, local), _regroup(ws, source_major, world, local)
        y = torch.cat([expert(part) for expert, part in zip(self.experts, xs.split(per_local.sum(0).tolist()))])
        y = _regroup(y * ws[:, None], expert_major, local, world)  # back to source-major
        y = AllToAll.apply(y, send, recv, "outputs")
        out = torch.zeros_like(x).scatter_add(0, token[:, None].expand(-1, x.shape[-1]), y)
        if full.shared is not None:
            s = full.shared(x)
            out = out + (torch.sigmoid(full.shared_gate(x)) * s if full.shared_gate is not None else s)
        return out.view(shape)


def _regroup(x, sizes, outer, inner):
    """Chunks of ``sizes`` laid out (outer, inner) reordered to (inner, outer) (Megatron's sort_chunks_by_idxs)."""
    chunks = x.split(sizes)
    return torch.cat([chunks[o * inner + i] for i in range(inner) for o in range(outer)])


def routing(case, tokens, experts, top_k):
    """The fixed routing bias of a case: token i -> experts first(i), first(i) + 1, ... (mod E)."""
    i = torch.arange(tokens)
    first = i if case == "balanced" else torch.where(i % 2 == 0, 0, i)
    return fixed_route(tokens, experts, top_k, first=first)


def run_case(case, spec, batch, seq):
    torch.manual_seed(0)
    moe_layers = spec.layers - spec.moe.dense_layers
    fulls = [moe_mlp(spec).to(torch.bfloat16) for _ in range(moe_layers)]
    layers = [ExpertParallelMoE(f) for f in fulls]
    norms = [nn.Parameter(torch.ones(spec.hidden, dtype=torch.bfloat16)) for _ in range(moe_layers)]
    torch.manual_seed(1 + dist.get_rank())  # each rank its own tokens
    h = torch.randn(batch, seq, spec.hidden, dtype=torch.bfloat16, requires_grad=True)
    route = routing(case, batch * seq, spec.moe.experts, spec.moe.top_k)
    result = {}

    with torch.no_grad():  # the EP layer computes what the whole MoE MLP computes on these tokens
        n = rms_norm(h, norms[0])
        result["max_abs_error"] = (layers[0](n, route) - fulls[0](n, route)).abs().max().item()

    n = rms_norm(h, norms[0])
    with SavedStorages() as saved:
        out = layers[0](n, route)
    result["saved_bytes"] = storage_bytes(saved, [n, *fulls[0].parameters()])
    result["received_copies"] = layers[0].received
    out.float().sum().backward()
    dist.barrier()

    for checkpoint in (None, "reentrant", "non-reentrant"):  # without recomputation, then each rerun mode
        result["records" if checkpoint is None else f"records-{checkpoint}"] = _step(layers, norms, route, h, checkpoint)
    # the same layers without shared experts: nothing after the combine saves what it sent
    alone = spec.model_copy(update={"moe": spec.moe.model_copy(update={"shared_ffn_hidden": 0, "shared_gate": False})})
    torch.manual_seed(0)
    layers = [ExpertParallelMoE(moe_mlp(alone).to(torch.bfloat16)) for _ in range(moe_layers)]
    for checkpoint in ("reentrant", "non-reentrant"):
        result[f"records-no-shared-{checkpoint}"] = _step(layers, norms, route, h, checkpoint)
    return result


def _step(layers, norms, route, h, checkpoint):
    """The collectives of a forward and backward through every layer (checkpointed or not)."""
    LOG["records"] = []
    LOG["phase"] = "forward"
    x = h
    for layer, norm in zip(layers, norms):
        x = x + _block(layer, norm, route, x, checkpoint)
    LOG["phase"] = "backward"
    x.float().sum().backward()
    LOG["phase"] = "setup"
    records, LOG["records"] = LOG["records"], []
    dist.barrier()
    return records


def _block(layer, norm, route, x, checkpoint):
    """One MoE block, its forward recomputed in backward under ``checkpoint`` (torch.utils.checkpoint); what a
    rerun sends is marked ``rerun``."""
    def run(y):
        LOG["rerun"] = LOG["phase"] == "backward"
        try:
            return layer(rms_norm(y, norm), route)
        finally:
            LOG["rerun"] = False
    if checkpoint is None:
        return run(x)
    return torch.utils.checkpoint.checkpoint(run, x, use_reentrant=checkpoint == "reentrant")


def main(out_dir, store, spec_json, batch, seq):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    spec = Transformer.model_validate_json(spec_json)
    results = {case: run_case(case, spec, int(batch), int(seq)) for case in ("balanced", "imbalanced")}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()
    # leave without C++ static destructors: one of torch 2.13's threads is still joinable at interpreter exit
    # about once in 30 runs (std::terminate, exit -6, after the results were written and the group destroyed)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
