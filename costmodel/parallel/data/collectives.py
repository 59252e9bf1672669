"""Collectives of the data axis per step: DDP all-reduce, ZeRO-1/2, FSDP (ZeRO-3), HSDP.

Source: Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 7 (2 Psi per step for DP and stages 1-2,
3 Psi for stage 3); Scaling Book training chapter (FSDP: all-gather forward, all-gather +
reduce-scatter backward); Zhao et al. 2023, arXiv:2304.11277 (FSDP, HSDP).
"""

from __future__ import annotations

from costmodel.mathops import above_one, where
from costmodel.parallel.collective import Collective, present, times_each
from costmodel.parallel.data.state import gather_dtype_bytes


def collectives(*, params, root_params, layers, recipe, point) -> list[Collective]:
    """Collectives one device joins on the data axis in one optimizer step.

    ``params`` is this device's share before data-axis sharding, of which ``root_params`` sit outside
    the ``layers`` blocks (embeddings, final norm, output layer). DDP and ZeRO-1 reduce gradients
    once per step; ZeRO-2, which keeps only its gradient shard, every micro-batch (DeepSpeed's stage 2 reduces
    in every backward: engine.py L2051-2053; FSDP's SHARD_GRAD_OP likewise, without a pipeline). FSDP wraps each block (one all-gather / reduce-scatter per block) and the root,
    and gathers for every micro-batch (FSDP2 reshards after each backward): its calls scale by
    grad_accum x m. The root keeps its weights gathered from forward to backward (FSDP2's heuristic
    for the root module, torch 2.13 _fsdp_state.py). Under a pipeline (torch.distributed.pipelining) each
    stage's FSDP2 units skip the gradient sync and the reshard after every micro-batch's backward and
    reduce-scatter once, after the last (stage.py backward_one_chunk, perform_reduce_grad): one forward
    gather and one reduce-scatter per schedule step, and, resharded after each forward, a gather in each of
    the m backwards (m + 1 in all under 1F1B or GPipe, and interleaved with up to 3 chunks: torch's runtime keeps
    at most 3 of a rank's stages gathered (schedules.py max_active_stages), so more chunks gather more, which is
    not modelled; tests/test_torch_distributed_llama.py). HSDP's replicas all-reduce each unit's shard after its
    reduce-scatter (FSDP2 foreach_reduce), as often.
    """
    point = point.sharding  # with a framework's CP ranks folded into the shards (cost/point.py)
    grads = recipe.grad_comm_bytes * params
    fsdp, dp, zero = point.fsdp, point.dp, point.zero
    if zero == 0 or not present(fsdp):
        if not (present(dp) or present(fsdp)):
            return context_gradients(grads, point)
        return [Collective("all-reduce", "data", "gradients", "backward", dp * fsdp, 1, grads)] + \
            context_gradients(grads, point)
    if zero == 3:
        out = _fsdp_unit("blocks", params - root_params, layers, recipe, fsdp, point.reshard_after_forward)
        out += _fsdp_unit("root: embeddings, norm, output", root_params, 1, recipe, fsdp, False)
        once = where(above_one(point.pp), point.grad_accum, point.micro_steps)  # per schedule step under a pipeline
        out = [c.times(point.micro_steps if c.phase == "backward" and c.op == "all-gather" else once) for c in out]
    else:  # ZeRO-2 keeps only its shard of the gradient: it reduce-scatters every micro-batch's
        scatter = [Collective("reduce-scatter", "fsdp", "gradients", "backward", fsdp, 1, grads)]
        if zero == 1 and point.zero1_reduce == "all-reduce":  # the whole buffer, each rank then steps its shard
            scatter = [Collective("all-reduce", "fsdp", "gradients (all of them: the framework's ZeRO-1)", "backward",
                                  fsdp, 1, grads)]
        out = (times_each(scatter, point.micro_steps) if zero == 2 else scatter) + [
            Collective("all-gather", "fsdp", "updated weights", "optimizer", fsdp, 1,
                       gather_dtype_bytes(recipe, zero) * params)]
    shard = grads / fsdp
    if present(dp) and zero == 3:  # HSDP: each unit's replicas all-reduce its reduce-scatter's output, as often
        sharded = above_one(fsdp)  # arrays: where a layout has one shard, the one all-reduce its numbers list
        out += [Collective("all-reduce", "dp", c.purpose.replace("gradients", "gradient shards"), "backward", dp,
                           where(sharded, c.calls, 0), c.buffer_bytes / fsdp) for c in out if c.op == "reduce-scatter"]
        if sharded is not True:
            out.append(Collective("all-reduce", "dp", "gradient shards", "backward", dp, where(sharded, 0, 1), shard))
    elif present(dp):  # replicas of ZeRO-1/2 shards all-reduce the gradient shard once per step
        out.append(Collective("all-reduce", "dp", "gradient shards", "backward", dp, 1, shard))
    return out + context_gradients(shard, point)


def context_gradients(grads, point) -> list[Collective]:
    """CP ranks hold the same weights and see different tokens: their gradients (the shard each data
    rank reduced, ``grads``) are summed over the c ranks once per step. Megatron-core reduces over the
    data-parallel-with-CP group in one collective (parallel_state's dp_cp group); here the CP group
    is its own all-reduce, like HSDP's replicas."""
    if not present(point.cp):
        return []
    return [Collective("all-reduce", "cp", "gradients (CP ranks hold the same weights)", "backward", point.cp, 1,
                       grads)]


def _fsdp_unit(what: str, params, units, recipe, fsdp, reshard: bool) -> list[Collective]:
    """One FSDP unit type (``units`` of them): gather forward, again in backward if resharded, reduce-scatter."""
    if isinstance(params, int) and params == 0:
        return []
    gathered = recipe.compute_bytes * params / units
    out = [Collective("all-gather", "fsdp", f"weights ({what})", "forward", fsdp, units, gathered)]
    if reshard:
        out.append(Collective("all-gather", "fsdp", f"weights again ({what})", "backward", fsdp, units, gathered))
    out.append(Collective("reduce-scatter", "fsdp", f"gradients ({what})", "backward", fsdp, units,
                          recipe.grad_comm_bytes * params / units))
    return out
