"""The named framework profiles (``--framework``): each term's switch and default with the code it is read from,
and the constants fitted to measured runs, with the data they were fitted on (specs/framework.py defines them)."""

from costmodel.specs import EXACT
from costmodel.specs.framework import MiB, Framework, FrameworkTime
from costmodel.specs.framework_time import Stalls

_NANOTRON = "huggingface/nanotron@67c5ebb6a925cb47026b22013af8bd1bb6c46d93 (the Ultra-Scale Playbook's bench branch)"
#: (pipelined, nodes, stalled, runs) over the whole sweep, 64 nodes included: benchmarks/fit_step_nanotron.py
_NANOTRON_STALLS = [(False, 1, 0, 21), (False, 2, 0, 54), (False, 4, 3, 37), (False, 8, 4, 36), (False, 16, 4, 81),
                    (False, 32, 1, 63), (False, 64, 25, 41), (True, 1, 2, 35), (True, 2, 4, 61), (True, 4, 14, 105),
                    (True, 8, 20, 156), (True, 16, 38, 185), (True, 32, 43, 143), (True, 64, 87, 107)]
#: the caching allocator's reserve fitted on nanotron's runs (benchmarks/fit_memory_nanotron.py); the
#: other profiles borrow it (same PyTorch allocator, no measured runs of theirs in the training data)
_FITTED = dict(activation_factor=1.2, reserve_bytes=253_616_538, error_low=-0.28, error_high=0.2)
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
                hardware="h100-sxm", kernel_factor=1.051, layer_floor_s=0.00441, pipeline_tp_rank_s=0.002071,
                data_factor=3.563,
                error_low=-0.883, error_high=0.319, stall_ratio=2.014, steady_low=-0.336, steady_high=0.329, max_nodes=32,
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
            # core/transformer/transformer_block.py get_num_layers_to_build: 'num_layers should be divisible by
            # pipeline_model_parallel_size' (L + 2 under account_for_*_in_pipeline_split), and with a virtual pipeline
            # each stage's layers by its chunks (megatron/training/arguments.py)
            whole_chunks=True,
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

