"""Framework profiles: what a training framework allocates beyond the exact accounting.

The exact accounting (the default, ``exact``) is what the homework problems and the PyTorch
cross-checks use: persistent state plus the tensors autograd saves. A profile names the buffers
and transients a framework adds (each a term of :mod:`costmodel.formulas.overheads` with the code it
is read from), its defaults (pipeline split, precision recipe), and the constants fitted to its
measured peaks, with the data they were fitted on.
"""


from typing import Annotated, Literal

from costmodel.specs import EXACT, SCHEDULES
from costmodel.specs.base import HighError, LowError, Name, Spec, Text, elements, field
from costmodel.units import dtype_bytes
from costmodel.specs.framework_time import FrameworkTime, Stalls  # noqa: F401  (re-exported)

MiB = 2**20


class Framework(Spec):
    """Which overhead terms a framework has, its defaults, and its fitted constants."""

    name: Name
    description: Text = ""
    recipe: Name | None = field(None, description="the precision recipe the framework trains with, if fixed")
    split: Literal["even", "compute"] = field("even", description="how it spreads layers over pipeline stages")
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


_NANOTRON = "huggingface/nanotron@67c5ebb6a925cb47026b22013af8bd1bb6c46d93 (the Ultra-Scale Playbook's bench branch)"
#: (pipelined, nodes, stalled, runs) over the whole sweep, 64 nodes included: benchmarks/fit_step_nanotron.py
_NANOTRON_STALLS = [(False, 1, 0, 21), (False, 2, 0, 54), (False, 4, 3, 37), (False, 8, 4, 36), (False, 16, 5, 81),
                    (False, 32, 1, 63), (False, 64, 25, 41), (True, 1, 2, 35), (True, 2, 4, 61), (True, 4, 14, 105),
                    (True, 8, 20, 156), (True, 16, 38, 185), (True, 32, 43, 143), (True, 64, 87, 107)]
#: the caching allocator's reserve fitted on nanotron's runs (benchmarks/fit_memory_nanotron.py); the
#: other profiles borrow it (same PyTorch allocator, no measured runs of theirs in the training data)
_FITTED = dict(activation_factor=1.21, reserve_bytes=196_806_902, error_low=-0.279, error_high=0.2)
_BORROWED = "nanotron's runs, borrowed (no measured runs of this framework in shared/data/training-runs)"
_OUTSIDE = dict(context_bytes=512 * MiB, nccl_communicators=4, nccl_channels=32)

#: the framework of the training data whose runs are slowest against the hardware's step model (its runs took a
#: median 2.2x what the model predicts without its fitted time: benchmarks/fit_step_nanotron.py): an unmeasured
#: framework's range reaches as far as its fitted time on the same layout
SLOWEST_MEASURED = "nanotron"

#: Named profiles. Fitted constants: benchmarks/fit_memory_nanotron.py prints them.
FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in [
        Framework.builtin(name=EXACT, description="the exact accounting: state and saved tensors, nothing else "
                  "(what PyTorch's saved_tensors_hooks and the homework problems see)"),
        Framework.builtin(
            name="nanotron",
            description="nanotron: bf16 params, fp32 grad buffer and master weights, ZeRO-0 (DDP) or ZeRO-1, "
            "SP, 1F1B, compute-balanced stages, fp32 loss",
            recipe="megatron", split="compute", ddp_buckets=True, zero1_gather=True, loss_upcast="copy", p2p_buffers=True,
            sp_gather_buffer=True, pending_reduce_scatters=True, data_overlap="none",
            # accumulate_grad_in_fp32: DDP's hook and the ZeRO-1 sync reduce the fp32 buffers, and ZeRO-1
            # all-reduces the whole buffer (trainer.py L526-533: "too memory hungry, instead we run all_reduce")
            reduce_dtype="fp32", zero1_reduce="all-reduce",
            zero_stages=[1], hybrid_zero_min=4,  # ZeroDistributedOptimizer over its one dp group, or DDP
            # pp_engine "afab" (all forward, all backward) or "1f1b" (config/utils_config.py L95-107,
            # parallel/pipeline_parallel/engine.py L167, L224): no interleaved stages
            schedules=["gpipe", "1f1b"],
            # parallelism_config.recompute_layer: each layer whole, by a reentrant CheckpointFunction
            # (config/parallelism_config.py L26-35, models/llama.py L740-751)
            recompute_modes=["none", "full"], checkpoints=["reentrant"],
            data_overlap_source="its runs' step times fit the data-axis traffic unoverlapped "
            "(benchmarks/fit_step_nanotron.py: the profile's time.data_factor)",
            attention_kernel="fa2",  # flash-attn 2's flash_attn_varlen_func (models/llama.py L271-286)
            # fitted by benchmarks/fit_memory_nanotron.py (median |error| of rank 0's reserved peak);
            # declared, not fitted (the sweep's reserved memory excludes them): a CUDA 12 context with
            # lazy module loading, about 0.5 GiB; NCCL Simple buffers for the world, dp, tp and pp groups
            **_FITTED, **_OUTSIDE,
            # fitted by benchmarks/fit_step_nanotron.py (robust log error of the step time)
            time=FrameworkTime.builtin(
                hardware="h100-sxm", kernel_factor=1.04, layer_floor_s=0.004407, pipeline_tp_rank_s=0.002069,
                data_factor=3.578,
                error_low=-0.883, error_high=0.313, stall_ratio=2.014, steady_low=-0.335, steady_high=0.327, max_nodes=32,
                stalls=[Stalls.builtin(pipelined=p, nodes=n, stalled=k, runs=t) for p, n, k, t in _NANOTRON_STALLS],
                fitted_on="977 runs of shared/data/training-runs/ultrascale_playbook_1b_3b.csv on 1-32 nodes "
                "(step = gbs x 4096 / tok_s; the 148 runs on 64 nodes, a median 3.9x slower than predicted, are "
                "left out), on h100-sxm's step model"),
            fitted_on="1,125 runs of shared/data/training-runs/ultrascale_playbook_1b_3b.csv (nanotron 1B and 3B "
            "on 1-64 nodes of 8 x H100; gpu_mem_GB = torch.cuda.max_memory_reserved() / 2^30 of world rank 0, "
            "the first pipeline stage: nanotron@67c5ebb6 src/nanotron/helpers.py L615-616, L775-776)",
            source=_NANOTRON + ": helpers.py L361-388 (fp32 accumulator, ZeRO-1 optimizer), trainer.py L526-533 (ZeRO-1 "
            "all-reduces the fp32 buffer), optim/gradient_accumulator.py L322-382 (DDP's fp32 hook), models/llama.py L271-286 "
            "(flash-attn 2), parallel/tensor_parallel/functional.py L466-469, L600 and parallel/pipeline_parallel/p2p.py "
            "L348-391 (reduce-scatter inputs; the receive's host sync), trainer.py L797-799 "
            "(DDP at ZeRO-0 only), models/base.py L211-235 (split), models/llama.py L874-925 (fp32 logits)",
        ),
        Framework.builtin(
            name="megatron",
            description="Megatron-LM/NeMo with the distributed optimizer (--fsdp N --zero 1): bf16 params and fp32 "
            "grads in contiguous buffers (collectives in place), in-place fp32 cross-entropy, TE's cached "
            "weight gradients, uniform stages",
            recipe="megatron", split="even", loss_upcast="in-place", sp_gather_buffer=True, wgrad_cache=True,
            # NeMo's Llama configs set bias_activation_fusion = True: core/transformer/mlp.py then runs
            # core/fusions/fused_bias_swiglu.py's SwiGLUFunction, which saves only its input
            fused_swiglu=True,
            p2p_buffers=True, data_overlap="none", zero_stages=[1],
            in_hardware_fit=True,  # the DGXC recipes h100-sxm's step fraction is fitted on run NeMo on Megatron-core
            # core/pipeline_parallel/schedules.py get_forward_backward_func: pipelining without interleaving
            # (1F1B) or with it (a virtual pipeline size); no GPipe, no zero-bubble schedule
            schedules=["1f1b", "interleaved"],
            recompute_modes=["none", "selective", "full"],  # --recompute-granularity full|selective (arguments.py)
            # core/distributed/distributed_data_parallel.py: dense parameters' gradient buffers, and the
            # distributed optimizer's shards, over intra_dp_cp_group (data_parallel_group with_context_parallel)
            cp_in_data=True,
            checkpoints=["reentrant"],  # megatron/core/tensor_parallel/random.py CheckpointFunction: the forward again
            reduce_dtype="fp32",  # bf16 training reduces the fp32 grad buffer unless --grad-reduce-in-bf16
            data_overlap_source="Megatron-core's DistributedDataParallelConfig: overlap_grad_reduce and "
            "overlap_param_gather default to False (--overlap-grad-reduce turns them on; NeMo's recipes do)",
            **_FITTED, **_OUTSIDE, fitted_on=_BORROWED,
            source="NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553: core/distributed/"
            "param_and_grad_buffer.py L1181-1195, L513-526, L710-724 (buffers, in-place collectives); "
            "core/tensor_parallel/cross_entropy.py L25-77; core/utils.py L727-753 (global memory buffer); "
            "core/transformer/transformer_block.py L147-159 (uniform split); NVIDIA/Megatron-LM@00119989 "
            "core/distributed/distributed_data_parallel_config.py (overlap_grad_reduce, overlap_param_gather: False), "
            "core/distributed/distributed_data_parallel.py (buffers over intra_dp_cp_group: data x CP); "
            "NVIDIA/Megatron-LM@000c4ac2 megatron/training/arguments.py --recompute-granularity (choices full, "
            "selective) and validate_args, 'if args.bf16:' ('bfloat16 "
            "requires gradient accumulation and all-reduce to be done in fp32': accumulate_allreduce_grads_in_fp32 "
            "unless --grad-reduce-in-bf16)",
        ),
        Framework.builtin(
            name="deepspeed",
            description="DeepSpeed ZeRO (--fsdp N --zero 1|2|3) with its default zero_optimization settings: 16-bit "
            "weights and gradients, fp32 master + Adam m, v, the contiguous gradient bucket, the output layer's "
            "whole gradient (ZeRO-2/3), the step's fp64 norm and fp32 gradient copies, ZeRO-3's gathered and "
            "prefetched parameters; the loss on an fp32 copy of the logits (Hugging Face models); pipelines with "
            "ZeRO-0/1 and the 1F1B schedule only",
            recipe="zero", split="even", zero_buffers=True, loss_upcast="copy", p2p_buffers=True, pipeline_zero_max=1,
            schedules=["1f1b"],  # runtime/pipe/schedule.py TrainSchedule: synchronous 1F1B only
            # the model's own checkpointing (deepspeed.checkpointing wraps what the model code marks): any but
            # torchtitan's per-op policy
            recompute_modes=["none", "selective", "full", "every"],
            cp_kinds=["a2a"],  # DeepSpeed-Ulysses (deepspeed/sequence/layer.py DistributedAttention): all-to-alls, no ring
            zero_stages=[1, 2, 3],
            hybrid_zero_min=3,  # ZeRO-1/2 partition over the whole data-parallel group; ZeRO++'s hpZ at stage 3
            # (runtime/zero/config.py L294 zero_hpz_partition_size)
            **_FITTED, **_OUTSIDE, fitted_on=_BORROWED,
            source="microsoft/DeepSpeed@38327e07f6cd39b63418f60cedd1651b0be3e7c3: runtime/zero/config.py L98-134, "
            "L168, L208-237, L351-353 (defaults); runtime/zero/stage_1_and_2.py L2048-2061, L676-680, L802 (gradient "
            "bucket, released before the step), L1699, L1857, L1891-1916 (fp64 norm, fp32 gradient partition); "
            "runtime/zero/stage3.py L537-540, L954-961, L1895-1914 (bucket, fp32 sub-group); "
            "comm/coalesced_collectives.py L186-199 (reduce-scatter copy); partitioned_param_coordinator.py L300, "
            "L378-385, L540-551 (gathering, prefetch, reuse); runtime/engine.py L1017-1021 (16-bit gradients under "
            "ZeRO), L1639-1642 (no overlap_comm with pipelines); runtime/pipe/engine.py L77-78 (ZeRO < 2 with "
            "pipelines), L1118-1119, L1173-1175 (one activation and one gradient receive buffer, kept); "
            "runtime/pipe/schedule.py L189-252 (TrainSchedule: 1F1B); "
            "transformers 5.23 loss/loss_utils.py L61 (ForCausalLMLoss: logits.float())",
        ),
        Framework.builtin(
            name="torchtitan",
            description="torchtitan with FSDP2 (--fsdp N, ZeRO-3): fp32 sharded params, bf16 gathered weights and "
            "activations, fp32 reduce-scatter, fused AdamW, fp32 cross-entropy on an upcast copy",
            recipe="fsdp2", split="even", loss_upcast="copy", fsdp_buffers=True, reduce_dtype="fp32", p2p_buffers=True,
            zero_stages=[3],
            data_overlap="overlap",
            data_overlap_source="FSDP2 prefetches each block's all-gather and reduce-scatters on its own streams "
            "(torch distributed/fsdp/_fully_shard/_fsdp_param_group.py)",
            attention_kernel="cudnn",  # SDPA with cuDNN attention first (models/attention.py L169-199)
            kernels="eager",  # compile = false in its train configs (models/llama3/train_configs/llama3_8b.toml)
            recompute_note="its train configs run selective AC 'op' (mode = \"selective\", selective_ac_option = "
            "\"op\"): give --recompute op",
            # activation_checkpoint.mode none | full | selective with selective_ac_option "op" or a layer frequency K
            recompute_modes=["none", "full", "every", "op"],
            cp_in_data=True,  # parallelize.py applies fully_shard over the flattened "dp_shard_cp" mesh
            # torch's context_parallel SDPA: ring attention whose K/V shards rotate by all-gather (its default
            # context_parallel_rotate_method) or all-to-all; no Ulysses-style head exchange
            cp_kinds=["allgather", "alltoall"],
            **_FITTED, **_OUTSIDE, fitted_on=_BORROWED,
            source="pytorch/torchtitan@238fa995 (models/attention.py L169-199: SDPA prefers CUDNN_ATTENTION; "
            "components/loss.py L20-27: .float() then cross_entropy; train.py "
            "L540-542: del pred; job_config.py L151: fused AdamW; parallelize apply_fsdp: bf16 params, fp32 "
            "reduce); torch 2.13 distributed/fsdp/_fully_shard (_fsdp_param_group.py, _fsdp_collectives.py)",
        ),
    ]
}

