"""Framework profiles: what a training framework allocates beyond the exact accounting.

The exact accounting (the default, ``exact``) is what the homework problems and the PyTorch
cross-checks use: persistent state plus the tensors autograd saves. A profile names the buffers
and transients a framework adds (each a term of :mod:`costmodel.formulas.overheads` with the code it
is read from), its defaults (pipeline split, precision recipe), and the constants fitted to its
measured peaks, with the data they were fitted on.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from costmodel.specs.base import Name, Spec, Text

MiB = 2**20


class Framework(Spec):
    """Which overhead terms a framework has, its defaults, and its fitted constants."""

    name: Name
    description: Text = ""
    recipe: Name | None = Field(None, description="the precision recipe the framework trains with, if fixed")
    split: Literal["even", "compute"] = Field("even", description="how it spreads layers over pipeline stages")
    ddp_buckets: bool = Field(False, description="DDP's gradient buckets when the data axis does not shard state")
    zero1_gather: bool = Field(False, description="ZeRO-1/2's flat all-gather buffers during the step")
    loss_upcast: bool = Field(False, description="logits cast to fp32 for the loss (the low-precision copy alive too)")
    sp_gather_buffer: bool = Field(False, description="a persistent buffer SP gathers layer inputs into")
    optimizer_step: Literal["fused", "foreach", "for-loop"] = Field(
        "fused", description="how the optimizer steps: foreach keeps one parameter-sized temporary")
    activation_factor: Annotated[float, Field(ge=1, le=10)] = Field(
        1.0, description="a: reserved bytes per byte of saved activations (fitted)")
    reserve_bytes: Annotated[float, Field(ge=0, le=2**40)] = Field(
        0.0, description="reserved bytes beyond every named term (fitted)")
    context_bytes: Annotated[float, Field(ge=0, le=2**40)] = Field(
        0.0, description="CUDA context and library workspaces, outside torch's allocator")
    nccl_communicators: Annotated[int, Field(ge=0, le=64)] = Field(0, description="NCCL communicators per process")
    nccl_channels: Annotated[int, Field(ge=0, le=64)] = Field(0, description="channels per communicator")
    nccl_buffsize: Annotated[int, Field(ge=0, le=2**30)] = Field(4 * MiB, description="NCCL_BUFFSIZE")
    fitted_on: Text = ""
    source: Text = ""

    @property
    def outside_allocator_bytes(self) -> float:
        """What the process holds outside torch's caching allocator (context, NCCL buffers)."""
        from costmodel.formulas.overheads import nccl_buffer_bytes

        return self.context_bytes + nccl_buffer_bytes(communicators=self.nccl_communicators,
                                                      channels=self.nccl_channels, buffsize=self.nccl_buffsize)

    @property
    def exact(self) -> bool:
        return self.name == "exact"


_NANOTRON = "huggingface/nanotron@67c5ebb6a925cb47026b22013af8bd1bb6c46d93 (the Ultra-Scale Playbook's bench branch)"

#: Named profiles. Fitted constants: benchmarks/fit_memory_nanotron.py prints them.
FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in [
        Framework(name="exact", description="the exact accounting: state and saved tensors, nothing else "
                  "(what PyTorch's saved_tensors_hooks and the homework problems see)"),
        Framework(
            name="nanotron",
            description="nanotron: bf16 params, fp32 grad buffer and master weights, ZeRO-0 (DDP) or ZeRO-1, "
            "SP, 1F1B, compute-balanced stages, fp32 loss",
            recipe="megatron", split="compute", ddp_buckets=True, zero1_gather=True, loss_upcast=True,
            sp_gather_buffer=True,
            # fitted by benchmarks/fit_memory_nanotron.py (median |error| of rank 0's reserved peak)
            activation_factor=1.28, reserve_bytes=197_012_480,
            # declared, not fitted (the sweep's reserved memory excludes them): a CUDA 12 context with
            # lazy module loading, about 0.5 GiB; NCCL Simple buffers for the world, dp, tp and pp groups
            context_bytes=512 * MiB, nccl_communicators=4, nccl_channels=32,
            fitted_on="1,125 runs of shared/data/training-runs/ultrascale_playbook_1b_3b.csv (nanotron 1B and 3B "
            "on 1-64 nodes of 8 x H100; gpu_mem_GB = torch.cuda.max_memory_reserved() / 2^30 of world rank 0, "
            "the first pipeline stage: nanotron@67c5ebb6 src/nanotron/helpers.py L615-616, L775-776)",
            source=_NANOTRON + ": helpers.py L361-388 (fp32 accumulator, ZeRO-1 optimizer), trainer.py L797-799 "
            "(DDP at ZeRO-0 only), models/base.py L211-235 (split), models/llama.py L874-925 (fp32 logits)",
        ),
    ]
}

DEFAULT_FRAMEWORK = "exact"
