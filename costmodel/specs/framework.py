"""Framework profiles: what a training framework allocates beyond the exact accounting.

The exact accounting (the default, ``exact``) is what the homework problems and the PyTorch
cross-checks use: persistent state plus the tensors autograd saves. A profile names the buffers
and transients a framework adds (each a term of :mod:`costmodel.formulas.overheads` with the code it
is read from), its defaults (pipeline split, precision recipe), and the constants fitted to its
measured peaks, with the data they were fitted on.
"""


from typing import Annotated, Literal

from costmodel.specs import EXACT, SCHEDULES, SPLITS
from costmodel.specs.base import HighError, LowError, Name, Spec, Text, elements, field
from costmodel.units import dtype_bytes
from costmodel.specs.framework_time import FrameworkTime

MiB = 2**20


class Framework(Spec):
    """Which overhead terms a framework has, its defaults, and its fitted constants."""

    name: Name
    description: Text = ""
    recipe: Name | None = field(None, description="the precision recipe the framework trains with, if fixed")
    split: Literal[SPLITS] = field("even", description="how it spreads layers over pipeline stages")
    whole_chunks: bool = field(
        False, description="its pipeline needs the layers (with the embedding and the loss under the ends split) to "
        "divide over the stages, and with interleaving over their model chunks")
    attention_kernel: Name | None = field(
        None, description="the attention kernel it runs, a kernel of the hardware's attention table (None: the "
        "hardware's default)")
    recompute_note: Text = field(
        "", description="how its own configs recompute, in --recompute's terms: said with a step or memory priced "
        "without recomputation")
    kernels: Literal["fused", "eager"] = field(
        "fused", description="its memory-bound ops: fused kernels (Megatron-core, Transformer Engine, "
        "torch.compile) or eager PyTorch, op by op (torchtitan's Llama code; cost/memory_bound.py)")
    ddp_buckets: bool = field(False, description="DDP's gradient buckets when the data axis does not shard state")
    zero1_gather: bool = field(False, description="ZeRO-1/2's flat all-gather buffers during the step")
    loss_upcast: Literal["none", "copy", "in-place"] = field(
        "none", description="logits cast to fp32 for the loss: copy (the max is subtracted out of place: the "
        "low-precision logits and the fp32 copy are transients) or in-place (only the low-precision logits are)")
    wgrad_cache: bool = field(False, description="Transformer Engine's cached dummy weight gradients")
    p2p_buffers: bool = field(False, description="pipeline receive buffers (activation and gradient)")
    fsdp_buffers: bool = field(False, description="FSDP2's gathered blocks and reduce-scatter input in flight")
    reduce_dtype: Literal["fp32", "bf16"] | None = field(
        None, description="dtype the data axis reduces gradients in, FSDP's reduce-scatter input included (None: "
        "the recipe's grad_comm)")
    zero1_reduce: Literal["reduce-scatter", "all-reduce"] = field(
        "reduce-scatter", description="how ZeRO-1 reduces the gradients before its step: reduce-scatter to the "
        "shards (ZeRO's rule) or all-reduce the whole buffer")
    sp_gather_buffer: bool = field(False, description="a persistent buffer SP gathers layer inputs into")
    fused_swiglu: bool = field(
        False, description="SwiGLU as one autograd function that saves its input only and recomputes SiLU in backward "
        "(Megatron-core's bias_swiglu_impl under bias_activation_fusion): b_a F per token and layer less than torch's "
        "silu(gate) * up")
    pending_reduce_scatters: bool = field(
        False, description="without a pipeline, the host runs a step ahead of the GPU: every row-parallel "
        "linear's full-width reduce-scatter input stays reserved (SP, TP > 1)")
    recompute_modes: list[Literal["none", "selective", "full", "every", "op"]] | None = field(
        None, description="the --recompute policies it runs (None: any); plan searches these")
    cp_in_data: bool = field(
        False, description="the data axis shards and reduces over its ranks and the CP ranks together (torchtitan's "
        "dp_shard x cp FSDP mesh; Megatron-core's dp x cp gradient buffers and distributed optimizer): state is "
        "sharded --fsdp x --cp ways and no separate CP gradient all-reduce runs")
    cp_kinds: list[Literal["ring", "a2a", "allgather", "alltoall"]] | None = field(
        None, description="the context-parallel attention it runs (--cp-kind), its default first (None: ring or a2a, "
        "ring by default)")
    checkpoints: list[Literal["reentrant", "non-reentrant"]] | None = field(
        None, description="how far its recomputation reruns (--checkpoint; None: either): reentrant to the layer's "
        "end, non-reentrant with torch's early stop")
    schedules: list[Literal[SCHEDULES]] | None = field(
        None, description="the pipeline schedules its engine runs (None: any)")
    zero_stages: list[Literal[1, 2, 3]] | None = field(
        None, description="the ZeRO stages it shards the data axis with (--fsdp > 1; None: any; ZeRO-0, plain data "
        "parallelism, always runs)")
    hybrid_zero_min: Annotated[int, field(ge=0, le=4)] = field(
        0, description="the lowest ZeRO stage it shards within replicas (--dp with --fsdp); 4: never")
    pipeline_zero_max: Annotated[int, field(ge=0, le=3)] = field(
        3, description="the highest ZeRO stage its pipeline engine runs with (--pp > 1)")
    data_overlap: Literal["overlap", "none"] | None = field(
        None, description="its default for the DP/FSDP traffic (--data-overlap): hidden behind backward (overlap) "
        "or after it (none); None: overlap, or for DeepSpeed what overlap_comm gives")
    data_overlap_source: Text = field("", description="where that default is read from")
    zero_buffers: bool = field(False, description="DeepSpeed ZeRO's buffers: the contiguous gradient bucket, the "
                               "output layer's whole gradient, the step's gradient copies and ZeRO-3's gathered "
                               "parameters")
    reduce_bucket_size: elements(0) = field(
        500_000_000, description="DeepSpeed reduce_bucket_size: elements in the contiguous gradient bucket")
    overlap_comm: bool | None = field(
        None, description="DeepSpeed overlap_comm (two gradient buckets at stages 1-2); None: its default, on at "
        "stage 3 only")
    prefetch_bucket_size: elements(0) = field(
        50_000_000, description="DeepSpeed stage3_prefetch_bucket_size: parameters gathered ahead, elements")
    sub_group_size: elements(1) = field(
        1_000_000_000, description="DeepSpeed sub_group_size: elements ZeRO-3's step casts to fp32 at a time (plus one "
        "parameter)")
    max_live_parameters: elements(0) = field(
        1_000_000_000, description="DeepSpeed stage3_max_live_parameters: gathered parameters at most, elements")
    optimizer_step: Literal["fused", "foreach", "for-loop"] = field(
        "fused", description="how the optimizer steps: foreach keeps one parameter-sized temporary")
    activation_factor: Annotated[float, field(ge=1, le=10)] = field(
        1.0, description="a: reserved bytes per byte of saved activations (fitted)")
    reserve_bytes: Annotated[float, field(ge=0, le=2**40)] = field(
        0.0, description="reserved bytes beyond every named term (fitted)")
    error_low: LowError = field(
        0.0, description="5th percentile of predicted / measured - 1 over the fitted runs")
    error_high: HighError = field(
        0.0, description="95th percentile of predicted / measured - 1 over the fitted runs")
    context_bytes: Annotated[float, field(ge=0, le=2**40)] = field(
        0.0, description="CUDA context and library workspaces, outside torch's allocator")
    nccl_communicators: Annotated[int, field(ge=0, le=64)] = field(0, description="NCCL communicators per process")
    nccl_channels: Annotated[int, field(ge=0, le=64)] = field(0, description="channels per communicator")
    nccl_buffsize: Annotated[int, field(ge=0, le=2**30)] = field(4 * MiB, description="NCCL_BUFFSIZE")
    time: FrameworkTime | None = field(None, description="its step time beyond the hardware's step model")
    in_hardware_fit: bool = field(
        False, description="its runs are among those the hardware's step model was fitted on (the DGXC recipes: "
        "NeMo on Megatron-core, and MaxText): without a time of its own, the hardware's range is its range")
    fitted_on: Text = ""
    source: Text = ""

    def time_on(self, hardware) -> FrameworkTime | None:
        """Its fitted step time where it applies: on the device its runs were measured on."""
        return self.time if self.time is not None and hardware.name == self.time.hardware else None

    def reduce_bytes(self, recipe) -> int:
        """Bytes per element it reduces gradients in: its reduce_dtype, else the recipe's grad_comm."""
        return dtype_bytes(self.reduce_dtype) if self.reduce_dtype else recipe.grad_comm_bytes

    @property
    def outside_allocator_bytes(self) -> float:
        """What the process holds outside torch's caching allocator (context, NCCL buffers)."""
        from costmodel.formulas.overheads import nccl_buffer_bytes

        return self.context_bytes + nccl_buffer_bytes(communicators=self.nccl_communicators,
                                                      channels=self.nccl_channels, buffsize=self.nccl_buffsize)

    @property
    def unmeasured_time(self) -> bool:
        """Whether no run in the training data times it: no fitted time of its own, and none of the runs the
        hardware's step model was fitted on are its (its step's range then spans the frameworks that have runs)."""
        return not self.exact and self.time is None and not self.in_hardware_fit

    @property
    def own_zero(self) -> int | None:
        """The ZeRO stage --zero left open means under it: its own where it runs no ZeRO-3 (Megatron's distributed
        optimizer and nanotron's ZeRO are stage 1); None: FSDP's 3, the layout's default."""
        return self.zero_stages[0] if self.zero_stages and 3 not in self.zero_stages else None

    def band(self, predicted):
        """Where the measured value lies for 90% of the fitted runs: predicted / (1 + q95) to / (1 + q5)."""
        return predicted / (1 + self.error_high), predicted / (1 + self.error_low)

    @property
    def exact(self) -> bool:
        return self.name == EXACT
