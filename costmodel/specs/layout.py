"""Parallel layout: the degree of each axis, ZeRO stage, tokens resident, and the axis mapping."""


from typing import Annotated, Literal

from pydantic import Field, model_validator

from costmodel.inputs import bounds
from costmodel.inputs.placement import DEFAULT_PLACEMENT, PLACEMENTS
from costmodel.specs import SCHEDULES, SPLITS
from costmodel.specs.base import Checked, count

Degree = count(bounds.DEVICES)
Steps = count(bounds.STEPS)


class Layout(Checked):
    """How one training step is spread over devices.

    The data axis is dp x fsdp: ``fsdp`` shards state at ZeRO stage ``zero`` (3 = FSDP), ``dp``
    replicates (plain DDP, or the replicate dimension of HSDP when both are > 1).
    """

    dp: Degree = Field(1, description="replicas on the data axis (DDP; HSDP replicas)")
    fsdp: Degree = Field(1, description="shards on the data axis (ZeRO / FSDP)")
    zero: Literal[0, 1, 2, 3] = Field(
        3, description="ZeRO stage on the fsdp axis: 1 optimizer, 2 + grads, 3 + weights (FSDP)")
    tp: Degree = Field(1, description="tensor-parallel degree (Megatron column/row split)")
    sp: bool = Field(False, description="sequence parallel inside the TP group")
    pp: Degree = Field(1, description="pipeline stages")
    cp: Degree = Field(1, description="context-parallel degree (sequence split across devices)")
    ep: Degree = Field(1, description="expert-parallel degree: each MoE layer's experts spread over ep devices of "
                       "the data axis (it must divide dp x fsdp)")
    etp: Degree | None = Field(None, description="expert tensor-parallel degree: each routed expert split over etp "
                               "of the tp ranks (default: all of them); below tp, the rest of the TP group joins the "
                               "experts' data axis (Megatron-core's parallel folding)")
    moe_imbalance: Annotated[float, Field(ge=1, le=1024)] = Field(
        1.0, description="tokens the busiest expert-parallel rank receives, as a multiple of the even share "
        "(dropless routing; 1: perfectly balanced). It scales that rank's all-to-alls, expert activations and time")
    tokens: Annotated[int, Field(ge=0, le=bounds.TOKENS)] = Field(
        0, description="tokens one model replica holds at once: micro-batch x sequence (tokens)")
    seq: Annotated[int, Field(gt=0, le=bounds.SEQUENCE)] | None = Field(
        None, description="sequence length: how far attention reaches (default: the model's, or --tokens when "
        "a micro-batch holds fewer tokens)")
    document: Annotated[int, Field(gt=0, le=bounds.SEQUENCE)] | None = Field(
        None, description="documents of this many tokens packed in each sequence, attention masked to each (Llama "
        "3's document mask): attention's FLOPs (MFU, HFU) and kernels reach within a document only. Default: one "
        "document per sequence")
    shard_activations: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="fraction of saved activations sharded over the fsdp axis (XXL (b): 0.5)")
    reshard_after_forward: bool = Field(
        True, description="FSDP frees gathered weights after forward and gathers again in backward")
    mx: Degree = Field(1, description="M_X: torus axes the data axis spans (TPU)")
    my: Degree = Field(1, description="M_Y: torus axes the TP axis spans (TPU)")
    recompute: Literal["none", "selective", "full", "every", "op"] = Field(
        "none", description="activation recomputation: selective drops the attention core, full keeps "
        "only layer inputs, every recomputes every recompute_layers-th layer whole (torchtitan's layer AC frequency), "
        "op is torchtitan's per-op selective AC (keeps every second matmul's output and attention's, reruns the rest)")
    recompute_layers: count(bounds.LAYERS) = Field(
        1, description="K for recompute='every': the K-th, 2K-th, ... layer is recomputed, floor(L / K) of them")
    checkpoint: Literal["reentrant", "non-reentrant"] = Field(
        "reentrant", description="how far a recomputation reruns a layer: reentrant to its end (Megatron; torch's "
        "use_reentrant=True; and use_reentrant=False with early_stop=False, as torchtitan sets it); non-reentrant "
        "(torch's use_reentrant=False with its default early stop) stops once backward's tensors exist again, "
        "skipping each layer's last matmul")
    flash: bool = Field(True, description="flash attention: no s x s tensors are saved")
    eager: bool = Field(False, description="without flash: Hugging Face's eager attention (K, V repeated to all "
                        "heads, softmax in fp32) rather than grouped math attention with a low-precision softmax")
    norm_stats: bool = Field(
        True, description="count the norms' fp32 per-token statistics (rstd; LayerNorm also mean), "
        "which Korthikanti et al. 2022 leave out")
    schedule: Literal[SCHEDULES] = Field("1f1b", description="pipeline schedule")
    microbatches: Steps | None = Field(
        None, description="m: micro-batches per step through the pipeline; default pp (the fewest 1F1B takes)")
    split: Literal[SPLITS] | None = Field(
        None, description="the framework's default (even when none) or: layers over pipeline stages: even "
        "(L/p each; where p does not divide L the first L mod p take one more, which Megatron-core refuses), ends (even over L + 2, the embedding and the loss a layer "
        "each on the first and last stage: Megatron's account_for_embedding/loss_in_pipeline_split) or compute "
        "(nanotron: balanced by matmul weights, the output layer counting as V D, so the first stages take more layers)")
    chunks: Steps = Field(1, description="v: model chunks per device (interleaved 1F1B)")
    cp_kind: Literal["ring", "a2a", "allgather", "alltoall"] | None = Field(
        None, description="context parallel: ring attention (K/V passed around), a2a (Ulysses all-to-all), or torch's "
        "ring attention rotating K/V by allgather or alltoall (torchtitan's context_parallel_rotate_method); None: "
        "the framework's own, else ring")
    tp_ends: Literal["vocab-parallel", "replicated"] = Field(
        "vocab-parallel", description="embedding and output layer under TP: split over the vocabulary "
        "(Megatron, torchtitan) or kept whole on every TP rank")
    tp_kv: Literal["split", "replicate"] = Field(
        "split", description="KV heads under TP: split (t must divide them) or replicate (t may be a multiple: "
        "each rank keeps a copy of the head its query heads read)")
    grad_accum: Steps = Field(1, description="gradient-accumulation steps per optimizer step")
    placement: str = Field(
        DEFAULT_PLACEMENT, description="GPUs: the order the axes fill the network, innermost (NVLink) first: a "
        "permutation of tp, cp, data (fsdp shards inside dp replicas) and pp, comma-separated; Megatron's order "
        "by default")

    @model_validator(mode="after")
    def _check(self) -> "Layout":
        if self.eager and self.flash:
            raise ValueError("--attention eager is math attention: it cannot be flash too")
        if self.sp and self.tp == 1:
            raise ValueError("sequence parallel (--sp) needs --tp > 1")
        if self.shard_activations and self.fsdp == 1:
            raise ValueError("--shard-activations shards over the fsdp axis: it needs --fsdp > 1")
        if self.etp is not None and self.tp % self.etp:
            raise ValueError(f"--etp {self.etp} does not divide --tp {self.tp}")
        if self.seq is not None and self.tokens and self.tokens % self.seq:
            raise ValueError(f"--tokens {self.tokens} is not a whole number of --seq {self.seq} sequences "
                             "(tokens = micro-batch x sequence)")
        if self.cp > 1 and self.tokens % self.cp:
            raise ValueError(f"--cp {self.cp} does not divide --tokens {self.tokens}")
        if self.chunks > 1 and self.schedule != "interleaved":
            raise ValueError("--chunks needs --schedule interleaved")
        if self.pp > 1 and self.schedule == "zb-h1" and self.m < self.pp:  # 1F1B with m < p is legal and common
            raise ValueError(f"--schedule {self.schedule} needs --microbatches >= --pp ({self.m} < {self.pp})")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"--placement {self.placement[:60]!r}: give tp, cp, data and pp once each, innermost "
                             f"first, comma-separated (default {DEFAULT_PLACEMENT})")
        if self.schedule == "interleaved" and self.pp > 1 and self.m % self.pp:
            raise ValueError(f"--schedule interleaved needs --microbatches a multiple of --pp "
                             f"({self.m} % {self.pp} != 0)")
        return self

    @property
    def m(self) -> int:
        """Micro-batches per step (default: as many as stages)."""
        return self.microbatches or self.pp

    @property
    def devices(self) -> int:
        """Devices in the mesh: dp x fsdp x tp x pp x cp."""
        return self.dp * self.fsdp * self.tp * self.pp * self.cp

    @property
    def data(self) -> int:
        """Degree of the whole data axis (X in the Scaling Book)."""
        return self.dp * self.fsdp

    @property
    def zero_stage(self) -> int:
        """The ZeRO stage in force (0 when there is nothing to shard over)."""
        return self.zero if self.fsdp > 1 else 0
