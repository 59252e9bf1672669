"""One rank of one training step of the FFN stack under FSDP2 or tensor parallelism, on gloo (CPU).

Started by tests/test_torch_distributed.py, one process per rank:

    RANK=r WORLD_SIZE=n python tests/dist_workers.py OUT_DIR STORE_FILE D F L BATCH SEQ

Every case in CASES runs in the same process group (one torch import per rank), and the rank writes
OUT_DIR/rank<r>.json: {case: {"dispatch": [record, ...], "python_api": [record, ...]}}, where a
record is {"op", "phase", "input_bytes", "output_bytes", "group"} (``python_api`` records
carry only op and phase). The model is tests/torch_models.py's ffn_stack; costmodel supplies only
the shape (FFNStack), never an expected number.

Two independent captures, compared by the test:

1. ``DispatchLog``, a TorchDispatchMode: every op in the c10d / _c10d_functional namespaces that
   reaches the dispatcher, with its tensors' sizes. FSDP2 issues ``c10d._allgather_base_`` and
   ``c10d._reduce_scatter_base_`` (through dist.all_gather_single / reduce_scatter_single); DTensor
   issues ``_c10d_functional.all_reduce`` / ``all_gather_into_tensor`` / ``reduce_scatter_tensor``,
   also those it issues inside an op on DTensors (the mode steps aside for DTensor ops, as torch's
   CommDebugMode does; tests/dist_llama_workers.py's sequence-parallel norms need it).
2. ``PythonApiLog``: the torch.distributed and functional-collective Python entry points that FSDP2
   and DTensor call, replaced for the step by counting wrappers (outermost call only). The
   replacement is process-wide, so it sees a call from any thread, including the autograd engine's.
   If the dispatch mode were not active where a collective runs, the two logs would disagree.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils._python_dispatch import TorchDispatchMode
from torch_models import ffn_stack

from costmodel.specs.model import FFNStack

NAMESPACES = {"c10d", "_c10d_functional", "c10d_functional"}
NOT_COLLECTIVES = {"wait_tensor", "_wrap_tensor_autograd"}  # bookkeeping ops, nothing sent

# FSDP2's copies (torch.ops.fsdp, distributed/fsdp/_fully_shard/_fsdp_collectives.py) -> (bytes read, written):
# the all-gather output into the parameters, the gradients into the reduce-scatter input
FSDP_COPIES = {
    "split_with_sizes_copy": lambda args, kwargs: (_nbytes(args[0]), sum(_nbytes(t) for t in kwargs["out"])),
    "chunk_cat": lambda args, kwargs: (sum(_nbytes(t) for t in args[0]), _nbytes(kwargs["out"])),
}

# dispatcher op -> (kind, index of its input in args, index of its output in args or "out" for the
# returned tensor); the group is read from the op's group argument (_group_size)
DISPATCH_OPS = {
    "c10d._allgather_base_": ("all-gather", 1, 0),
    "c10d._reduce_scatter_base_": ("reduce-scatter", 1, 0),
    "c10d.allreduce_": ("all-reduce", 0, 0),
    "_c10d_functional.all_gather_into_tensor": ("all-gather", 0, "out"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce-scatter", 0, "out"),
    "_c10d_functional.all_reduce": ("all-reduce", 0, "out"),
    "_c10d_functional.all_reduce_": ("all-reduce", 0, 0),
    "_c10d_functional.all_to_all_single": ("all-to-all", 0, "out"),  # torch's ring attention passes K, V on with it
}

# Python entry points FSDP2 / DTensor call, by module (those missing in this torch are skipped)
PYTHON_API = {
    dist: {"all_gather_single": "all-gather", "all_gather_into_tensor": "all-gather",
           "reduce_scatter_single": "reduce-scatter", "reduce_scatter_tensor": "reduce-scatter",
           "all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
           "all_to_all_single": "all-to-all", "broadcast": "broadcast"},
    funcol: {"all_gather_single": "all-gather", "all_gather_tensor": "all-gather",
             "all_gather_tensor_autograd": "all-gather", "reduce_scatter_single": "reduce-scatter",
             "reduce_scatter_tensor": "reduce-scatter", "reduce_scatter_tensor_autograd": "reduce-scatter",
             "all_reduce": "all-reduce", "all_to_all_single": "all-to-all", "broadcast": "broadcast"},
}


def _nbytes(x) -> int:
    """Bytes of a tensor or a list of tensors (elements x element size)."""
    return x.nbytes if isinstance(x, torch.Tensor) else sum(t.nbytes for t in x)


class DispatchLog(TorchDispatchMode):
    """Records each c10d / functional collective that reaches the dispatcher, with the phase."""

    def __init__(self):
        super().__init__()
        self.phase = "setup"
        self.records = []
        self.copies = []  # FSDP2's copies around its collectives: op, phase, bytes read and written

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):
            # A mode runs before tensor subclasses, and is off while its own handler runs: a
            # collective DTensor issues inside an op (a Partial argument redistributed by sharding
            # propagation, e.g. in the optimizer) would go unseen. NotImplemented lets DTensor run
            # first with this mode still on, as torch's CommDebugMode does.
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        if func.namespace == "fsdp" and func._opname in FSDP_COPIES:
            read, written = FSDP_COPIES[func._opname](args, kwargs or {})
            self.copies.append({"op": func._opname, "phase": self.phase, "read": read, "written": written})
        if func.namespace in NAMESPACES and func._opname not in NOT_COLLECTIVES:
            name = f"{func.namespace}.{func._opname}"
            record = {"op": name, "phase": self.phase, "input_bytes": None, "output_bytes": None,
                      "group": None}
            if name in DISPATCH_OPS:
                kind, i, o = DISPATCH_OPS[name]
                src, dst = args[i], out if o == "out" else args[o]
                record.update(op=kind, input_bytes=_nbytes(src), output_bytes=_nbytes(dst),
                              group=_group_size(func, args))
            self.records.append(record)
        return out


def _group_size(func, args) -> int:
    """Ranks in the process group a collective runs on (its group_name, or its boxed group)."""
    names = [a.name for a in func._schema.arguments]
    group = args[names.index("group_name" if "group_name" in names else "process_group")]
    if isinstance(group, str):
        return dist.distributed_c10d._resolve_process_group(group).size()
    return dist.ProcessGroup.unbox(group).size()


class PythonApiLog:
    """Replaces the Python collective entry points with wrappers that record (op, phase)."""

    def __init__(self, dispatch: DispatchLog):
        self.dispatch = dispatch
        self.records = []
        self._depth = threading.local()

    def _wrap(self, fn, kind):
        def wrapper(*args, **kwargs):
            depth = getattr(self._depth, "n", 0)
            if depth == 0:
                self.records.append({"op": kind, "phase": self.dispatch.phase})
            self._depth.n = depth + 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth.n = depth
        return wrapper

    @contextlib.contextmanager
    def patched(self):
        saved = [(module, name, getattr(module, name)) for module, names in PYTHON_API.items()
                 for name in names if hasattr(module, name)]
        try:
            for module, name, fn in saved:
                setattr(module, name, self._wrap(fn, PYTHON_API[module][name]))
            yield self
        finally:
            for module, name, fn in saved:
                setattr(module, name, fn)


def training_step(model, x, optimizer=torch.optim.AdamW):
    """Forward, backward of out.sum(), optimizer step (AdamW by default); every collective labelled
    with its phase."""
    opt = optimizer(model.parameters(), lr=1e-3)
    dispatch = DispatchLog()
    api = PythonApiLog(dispatch)
    with api.patched(), dispatch:
        dispatch.phase = "forward"
        loss = model(x).sum()  # each rank sums its own output; no collective
        dispatch.phase = "backward"
        loss.backward()
        dispatch.phase = "optimizer"
        opt.step()
    return {"dispatch": dispatch.records, "python_api": api.records, "copies": dispatch.copies}


def fsdp2_step(spec, batch, seq, *, reshard_after_forward):
    """fully_shard each block, then the root; bf16 compute and bf16 reduce on fp32 parameters."""
    model = ffn_stack(spec)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    kwargs = {} if reshard_after_forward is None else {"reshard_after_forward": reshard_after_forward}
    for block in model:
        fully_shard(block, mp_policy=policy, **kwargs)
    fully_shard(model, mp_policy=policy, **kwargs)
    x = torch.randn(batch, seq, spec.d_model, requires_grad=spec.input_requires_grad)
    return training_step(model, x)


class Checkpointed(torch.nn.Module):
    """A block whose forward torch.utils.checkpoint reruns in backward (reentrant or not; or, with ``context_fn``,
    non-reentrant under a selective policy)."""

    def __init__(self, block, reentrant: bool, context_fn=None, early_stop: bool = True):
        super().__init__()
        self.block, self.reentrant, self.context_fn, self.early_stop = block, reentrant, context_fn, early_stop

    def forward(self, x):
        if self.context_fn is not None:  # a selective policy (non-reentrant only)
            return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False, context_fn=self.context_fn,
                                                     early_stop=self.early_stop)
        return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=self.reentrant)


def tp_step(spec, batch, seq, *, sp, checkpoint=None):
    """Megatron split of each block (up column-wise, down row-wise), bf16 parameters and input.

    With sequence parallelism the block input and output are sharded on the sequence dim (1).
    ``checkpoint`` "reentrant" / "non-reentrant": every block recomputed in backward (full recomputation).
    """
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = init_device_mesh("cpu", (world,))
    model = ffn_stack(spec).to(torch.bfloat16)
    if sp:
        plan = {"up": ColwiseParallel(input_layouts=Shard(1)), "down": RowwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    for block in model:
        parallelize_module(block, mesh, plan)
    if checkpoint is not None:
        model = torch.nn.Sequential(*(Checkpointed(block, checkpoint == "reentrant") for block in model))
    x = torch.randn(batch, seq, spec.d_model, dtype=torch.bfloat16)
    if sp:
        x = x.chunk(world, dim=1)[rank].contiguous()
    return training_step(model, x.requires_grad_(spec.input_requires_grad))


#: case -> (step function, FFNStack.input_requires_grad, keyword arguments)
CASES = {
    "fsdp2-reshard": (fsdp2_step, False, {"reshard_after_forward": True}),
    "fsdp2-keep": (fsdp2_step, False, {"reshard_after_forward": False}),
    "fsdp2-default": (fsdp2_step, False, {"reshard_after_forward": None}),
    "tp-input-grad": (tp_step, True, {"sp": False}),
    "tp-no-input-grad": (tp_step, False, {"sp": False}),
    "sp-input-grad": (tp_step, True, {"sp": True}),
    "sp-no-input-grad": (tp_step, False, {"sp": True}),
    "tp-recompute": (tp_step, True, {"sp": False, "checkpoint": "reentrant"}),
    "sp-recompute": (tp_step, True, {"sp": True, "checkpoint": "reentrant"}),
    "tp-recompute-non-reentrant": (tp_step, False, {"sp": False, "checkpoint": "non-reentrant"}),
    "sp-recompute-non-reentrant": (tp_step, True, {"sp": True, "checkpoint": "non-reentrant"}),
}


def main(out_dir, store, d_model, d_ff, layers, batch, seq):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    results = {}
    for case, (step, input_grad, kwargs) in CASES.items():
        torch.manual_seed(0)
        spec = FFNStack(name="ffn", d_model=d_model, d_ff=d_ff, layers=layers, input_requires_grad=input_grad)
        results[case] = step(spec, batch, seq, **kwargs)
        dist.barrier()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()
    # leave without C++ static destructors: one of torch 2.13's threads is still joinable at interpreter exit
    # about once in 30 runs (std::terminate, exit -6, after the results were written and the group destroyed)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
