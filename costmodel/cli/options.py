"""Command-line options shared by the commands, declared once (typer ``Annotated`` aliases)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from costmodel.inputs import arguments, bounds
from costmodel.inputs.numbers import real, whole
from costmodel.specs import SCHEDULES, SPLITS
from costmodel.units import UnitSystem

DEGREE = dict(parser=whole(*arguments.DEGREE), metavar="N")
STEPS = dict(parser=whole(1, bounds.STEPS), metavar="N")
TORUS_AXES = dict(parser=whole(*arguments.TORUS_AXES), metavar="N")

def choices(values: tuple, name: str, **kwargs):
    """A typer.Option that takes one of ``values``: its metavar lists them when they fit a help column (20
    characters), else it is ``name`` and the help lists them; Tab completes them either way (cli/completion.py)."""
    listed = "|".join(values)
    option = typer.Option(metavar=listed if len(listed) <= 20 else name, **kwargs)
    option.cost4d_choices = tuple(values)
    return option


_LAYOUT = "Parallel layout"
_OUT = "Output"

ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", metavar="NAME|FILE", help="Built-in model name (see `cost4d models`) or a spec file (.toml/.json).")]
RecipeOpt = Annotated[str, typer.Option(metavar="NAME|FILE",
    help="Precision recipe: cs336 (default, 16 B/param), fsdp2 (FSDP2's bf16 policy, torchtitan's), zero, megatron, "
    "scaling-book, or a file.")]
FrameworkOpt = Annotated[str, typer.Option(metavar="NAME|FILE",
    help="What the training framework adds to the exact accounting: exact (default: state and saved "
    "tensors only, as PyTorch's hooks see them), nanotron (its buffers, fp32 loss, compute-balanced "
    "stages, fitted allocator reserve and step time; sets --recipe megatron), megatron, torchtitan, deepspeed "
    "(see `cost4d frameworks`), or a profile file.")]
HardwareOpt = Annotated[Optional[str], typer.Option(metavar="NAME|FILE",
    help="Device name (see `cost4d hardware`) or a hardware spec file.")]
TokensOpt = Annotated[int, typer.Option(parser=whole(0, bounds.TOKENS), metavar="TOKENS",
    help="Tokens one model replica holds at once: micro-batch x sequence.", rich_help_panel=_LAYOUT)]
SeqOpt = Annotated[Optional[int], typer.Option("--seq", parser=whole(1, bounds.SEQUENCE), metavar="TOKENS",
    help="Sequence length, how far attention reaches (default: the model's, or --tokens when a micro-batch holds "
    "fewer).", rich_help_panel=_LAYOUT)]
DpOpt = Annotated[int, typer.Option(**DEGREE, help="Data-parallel replicas (DDP; HSDP replicas).", rich_help_panel=_LAYOUT)]
FsdpOpt = Annotated[int, typer.Option(**DEGREE, help="Devices the data axis shards state over (ZeRO/FSDP).",
                                      rich_help_panel=_LAYOUT)]
ZeroOpt = Annotated[Optional[int], typer.Option(parser=whole(0, 3), metavar="0-3",
    help="ZeRO stage on the fsdp axis: 1 optimizer, 2 + gradients, 3 + weights (FSDP). Default: 3 (FSDP), or "
         "the framework's own stage where it runs no ZeRO-3 (megatron, nanotron: 1).",
    rich_help_panel=_LAYOUT)]
TpOpt = Annotated[int, typer.Option(**DEGREE, help="Tensor-parallel degree.", rich_help_panel=_LAYOUT)]
SpOpt = Annotated[bool, typer.Option("--sp", help="Sequence parallel within the TP group.",
                                     rich_help_panel=_LAYOUT)]
PpOpt = Annotated[int, typer.Option(**DEGREE, help="Pipeline stages (per-device figures are the heaviest stage's).",
                                    rich_help_panel=_LAYOUT)]
CpOpt = Annotated[int, typer.Option(**DEGREE, help="Context-parallel degree.", rich_help_panel=_LAYOUT)]
EpOpt = Annotated[int, typer.Option(**DEGREE, help="Expert-parallel degree (MoE models): each MoE layer's experts "
    "spread over this many devices of the data axis (--dp x --fsdp), tokens sent to them by all-to-alls.",
    rich_help_panel=_LAYOUT)]
EtpOpt = Annotated[Optional[int], typer.Option(**DEGREE, help="Expert tensor-parallel degree (MoE): each routed "
    "expert split over this many of the --tp ranks (default: all); below --tp the other TP ranks join the experts' "
    "data axis, so --ep may span them (Megatron-core's expert tensor-parallel size).", rich_help_panel=_LAYOUT)]
ImbalanceOpt = Annotated[float, typer.Option(parser=real(1, 1024), metavar="FACTOR",
    help="MoE load imbalance: tokens the busiest expert-parallel rank receives, as a multiple of the even share "
    "(dropless routing). Scales its all-to-alls, routed activations and expert time. Default 1: balanced.",
    rich_help_panel=_LAYOUT)]
ShardActOpt = Annotated[float, typer.Option(parser=real(0, 1), metavar="FRACTION",
    help="Fraction of activations sharded over the fsdp axis (XXL part (b): 0.5).",
    rich_help_panel=_LAYOUT)]
ReshardOpt = Annotated[bool, typer.Option(
    "--reshard/--no-reshard", help="FSDP frees gathered weights after forward (re-gathers in backward).",
    rich_help_panel=_LAYOUT)]
MxOpt = Annotated[int, typer.Option("--mx", **TORUS_AXES, help="M_X: torus axes the data axis spans (TPU).",
                                    rich_help_panel=_LAYOUT)]
MyOpt = Annotated[int, typer.Option("--my", **TORUS_AXES, help="M_Y: torus axes the TP axis spans (TPU).",
                                    rich_help_panel=_LAYOUT)]
UnitsOpt = Annotated[UnitSystem, typer.Option(metavar="si|iec",
    help="How bytes print: si (GB = 1e9 B, vendors' and ZeRO's unit) or iec (GiB = 2^30 B). "
    "JSON is always raw bytes.", rich_help_panel=_OUT)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (raw bytes, FLOPs, seconds).",
                                       rich_help_panel=_OUT)]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Plain tables (no box drawing, no colour) on a terminal too, "
                                         "as when output is piped.", rich_help_panel=_OUT)]
SymbolicOpt = Annotated[bool, typer.Option(
    "--symbolic", help="Print the formula in Scaling Book letters before the numbers.", rich_help_panel=_OUT)]

_SOLVE = "Compute-bound question (Scaling Book letters)"
FsdpXOpt = Annotated[int, typer.Option("--fsdp", **DEGREE, help="X: devices on the FSDP (data) axis.", rich_help_panel=_SOLVE)]
TpYOpt = Annotated[int, typer.Option("--tp", **DEGREE, help="Y: devices on the TP (model) axis.", rich_help_panel=_SOLVE)]
OverlapOpt = Annotated[str, typer.Option(metavar="sum|max",
    help="sum: the two axes' communication takes turns (Scaling Book text of early 2025); "
    "max: it overlaps (text since Aug 2025).", rich_help_panel=_SOLVE)]
PassOpt = Annotated[str, typer.Option(
    "--pass", metavar="forward|step", help="forward: the forward pass alone (CS336 (c)); step: forward + backward (x3 FLOPs and bytes).",
    rich_help_panel=_SOLVE)]
PeakOpt = Annotated[Optional[float], typer.Option(parser=real(*bounds.FLOPS), metavar="FLOP/S",
    help="C, peak FLOP/s per device; default the hardware's dense bf16.", rich_help_panel=_SOLVE)]
IciOpt = Annotated[Optional[float], typer.Option(parser=real(*bounds.BANDWIDTH), metavar="B/S",
    help="W, link bandwidth per axis in B/s (ICI: bidirectional, v5p 1.8e11); default the hardware's.",
    rich_help_panel=_SOLVE)]
FormatOpt = Annotated[str, typer.Option("--format", metavar="text|markdown|latex", help="text, markdown or latex.", rich_help_panel=_OUT)]
LimitOpt = Annotated[Optional[str], typer.Option(metavar="SIZE",
    help="Memory limit per device, e.g. 95GB (1e9 B) or 80GiB; default the --hardware's HBM.")]

_ADV = "Transformer training: recompute, pipeline, context"
RecomputeOpt = Annotated[str, typer.Option(metavar="none|selective|full|every:K|op",
    help="Activation recomputation: none, selective (Megatron's: the attention core), full (layer inputs only), "
    "every:K (every K-th layer fully; torchtitan's layer AC) or op (torchtitan's selective AC: keeps every second "
    "matmul's output and attention's, reruns the rest; dense Llama-style blocks).", rich_help_panel=_ADV)]
FlashOpt = Annotated[bool, typer.Option(
    "--flash/--no-flash", help="Flash attention saves no s x s tensors (default on).", rich_help_panel=_ADV)]
CheckpointOpt = Annotated[str, choices(("reentrant", "non-reentrant"), "MODE",
    help="How far recomputation reruns: reentrant to the layer's end (Megatron, use_reentrant=True; and "
    "torchtitan, whose non-reentrant checkpoint turns early_stop off); non-reentrant (torch's use_reentrant=False "
    "with its default early stop) stops once backward's tensors exist again, skipping each layer's last matmul "
    "under full, every:K and op, and the product with V under selective recomputation of math attention.",
    rich_help_panel=_ADV)]
AttentionOpt = Annotated[Optional[str], typer.Option(metavar="flash|math|eager",
    help="Attention implementation: flash (no s x s tensors saved; = --flash), math (grouped GQA, low-precision "
    "softmax; = --no-flash) or eager (Hugging Face eager: K, V repeated to all heads, fp32 softmax).",
    rich_help_panel=_ADV)]
ScheduleOpt = Annotated[str, choices(SCHEDULES, "SCHEDULE",
    help="Pipeline schedule: gpipe (AFAB), 1f1b, interleaved (with --chunks), zb-h1.", rich_help_panel=_ADV)]
TpKvOpt = Annotated[str, typer.Option(metavar="split|replicate",
    help="KV heads under TP: split (--tp must divide them) or replicate (--tp may be a multiple of them: each "
    "rank keeps a copy of the KV head its query heads read, and the copies' gradients are all-reduced).",
    rich_help_panel=_ADV)]
SplitOpt = Annotated[Optional[str], choices(SPLITS, "SPLIT",
    help="Layers over pipeline stages: even (L/p each; where p does not divide L the first L mod p take one more, "
    "which Megatron-core refuses), ends (even over L + 2: "
    "the embedding and the loss count as a layer each on the first and last stage, as Megatron's "
    "account_for_embedding and account_for_loss options do) or compute "
    "(nanotron: balanced by matmul weights with the output layer as V D, so early stages take more); "
    "default the --framework's (even for exact).", rich_help_panel=_ADV)]
MicroOpt = Annotated[Optional[int], typer.Option(**STEPS,
    help="Micro-batches per step (default: --pp).", rich_help_panel=_ADV)]
ChunksOpt = Annotated[int, typer.Option(**STEPS, help="Model chunks per device for --schedule interleaved.",
                                        rich_help_panel=_ADV)]
CpKindOpt = Annotated[Optional[str], typer.Option(
    metavar="ring|a2a|allgather|alltoall", help="Context parallel: ring (K/V around a ring), a2a (Ulysses), or torch's "
    "ring attention rotating K/V by allgather or alltoall (torchtitan's rotate methods); default: the framework's, "
    "else ring.", rich_help_panel=_ADV)]
AttentionKernelOpt = Annotated[Optional[str], typer.Option(
    metavar="cudnn|fa2|fa3|gemm", help="Flash attention's kernel, timed at its measured rate by head dim and "
    "sequence where the device ships a table (h100-sxm, h200, aws-p5: the FlashAttention-3 paper's H100 figures): "
    "cudnn (Transformer Engine, NeMo/Megatron), fa2 (flash-attn 2, PyTorch SDPA), fa3; gemm: attention's "
    "FLOPs over the full s x s at the GEMM efficiency. Default: the framework's, else the device's.")]
DocumentOpt = Annotated[Optional[int], typer.Option(
    min=1, metavar="TOKENS", help="Documents of this many tokens packed in each sequence, attention masked to "
    "each (Llama 3's document mask): attention's FLOPs (and MFU) count D / s of the s x s, its kernels run at "
    "length D.", rich_help_panel=_ADV)]
PlacementOpt = Annotated[str, typer.Option(
    metavar="ORDER", help="GPUs: the order the axes fill the network, innermost (NVLink) first: tp, cp, data "
    "(fsdp shards inside dp replicas) and pp, comma-separated, e.g. cp,tp,data,pp to keep a CP ring in the node. "
    "A MoE's experts take the same order: ep is the data block's innermost ranks, expert TP the tp block's. "
    "Default: tp,cp,data,pp (Megatron's).", rich_help_panel=_ADV)]
HsdpOpt = Annotated[Optional[int], typer.Option(**DEGREE,
    help="HSDP: shard within groups of this many devices (sets --fsdp); --dp counts the replicas across them.",
    rich_help_panel=_ADV)]
AccumOpt = Annotated[int, typer.Option(**STEPS, help="Gradient-accumulation steps per optimizer step.", rich_help_panel=_ADV)]
TpEndsOpt = Annotated[str, choices(("vocab-parallel", "replicated"), "HOW",
    help="Embedding and output layer under TP: vocab-parallel (Megatron, torchtitan) or replicated.",
    rich_help_panel=_ADV)]

KernelsOpt = Annotated[Optional[str], typer.Option(
    metavar="fused|eager", show_default=False, help="The memory-bound ops (norms, RoPE, SwiGLU, loss): fused "
    "kernels (Megatron-core and Transformer Engine; torch.compile) or eager PyTorch op by op (torchtitan's Llama "
    "code: RoPE in fp32 complex, GQA's repeated keys and values, SwiGLU in two kernels, the loss on an fp32 "
    "copy). Default: the framework's (torchtitan: eager, its configs leave compile off; others: fused).")]
