"""Training recipes: the dtype of every piece of training state (bytes per parameter)."""


from typing import Annotated, Literal

from pydantic import model_validator

from costmodel.specs.base import Name, Spec, Text, field
from costmodel.units import dtype_bytes

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "none"]


class Recipe(Spec):
    """Which dtype holds each kind of state. ``none`` means the state is not kept."""

    name: Name
    description: Text = ""
    compute: Dtype = field("bf16", description="dtype the matmuls run in; weights are cast to it")
    compute_weights: Literal["transient", "persistent"] = field(
        "transient",
        description="transient: autocast casts the master weights at each use (nothing kept); "
        "persistent: a low-precision copy of the weights is kept as the model's parameters")
    casts: Literal["autocast", "fsdp"] = field(
        "autocast", description="who makes transient compute weights: autocast (torch.autocast casts each weight at "
        "its matmul; the model runs in the master dtype) or fsdp (FSDP2's MixedPrecisionPolicy gathers them in the "
        "compute dtype and the module runs in it: every activation, the residual stream included, in the compute "
        "dtype; where the data axis does not shard weights, autocast, as torchtitan's maybe_enable_amp)")
    master: Dtype = field("fp32", description="dtype of the master weights the optimizer updates")
    grads: Dtype = field("fp32", description="dtype of the accumulated gradients kept between steps")
    grad_comm: Dtype = field("bf16", description="dtype gradients are reduced in")
    optimizer: Name = field("adamw", description="optimizer name, for the record")
    optimizer_states: Annotated[int, field(ge=0, le=16)] = field(2, description="states per parameter (Adam: m and v)")
    optimizer_dtype: Dtype = field("fp32", description="dtype of each optimizer state")
    activations: Dtype = field("bf16", description="dtype of activations saved for backward")
    source: Text = ""

    @model_validator(mode="after")
    def _casts_need_transient_weights(self):
        if self.casts == "fsdp" and self.compute_weights != "transient":
            raise ValueError("casts = 'fsdp' (FSDP2 gathers the compute weights) needs compute_weights = 'transient' "
                             "(no low-precision copy kept)")
        return self

    # bytes per element, derived once from the dtypes
    @property
    def compute_bytes(self) -> int:
        return dtype_bytes(self.compute)

    @property
    def weight_bytes(self) -> int:
        """Bytes per parameter of the kept low-precision weights (0 when transient)."""
        return dtype_bytes(self.compute) if self.compute_weights == "persistent" else 0

    @property
    def master_bytes(self) -> int:
        return dtype_bytes(self.master)

    @property
    def grad_bytes(self) -> int:
        return dtype_bytes(self.grads)

    @property
    def grad_comm_bytes(self) -> int:
        return dtype_bytes(self.grad_comm)

    @property
    def optimizer_bytes(self) -> int:
        """Bytes per parameter of optimizer state (states x dtype)."""
        return self.optimizer_states * dtype_bytes(self.optimizer_dtype)

    @property
    def activation_bytes(self) -> int:
        return dtype_bytes(self.activations)

    @property
    def autocast(self) -> bool:
        """Whether matmuls cast the master weights at each use (torch.autocast): the model runs in the
        master dtype and only autocast's ops run in the compute dtype. Under ``casts`` fsdp, only where the
        data axis does not shard weights (parallel/data/state.runs_autocast)."""
        return self.compute_weights == "transient"

    @property
    def state_bytes_per_param(self) -> int:
        """Persistent training state per parameter: weights + master + grads + optimizer."""
        return self.weight_bytes + self.master_bytes + self.grad_bytes + self.optimizer_bytes


#: Named recipes (shared/reference/conventions.md, "Precision recipes").
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in [
        Recipe.builtin(
            name="cs336",
            description="fp32 master weights, fp32 accumulated grads, fp32 AdamW; bf16 autocast (16 B/param)",
            source="Stanford CS336 (Spring 2025) Assignment 2, communication_accounting",
        ),
        Recipe.builtin(
            name="fsdp2",
            description="FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32 sharded weights, "
            "grads and AdamW (16 B/param); weights gathered in bf16, the module runs in bf16, gradients reduced in "
            "fp32; autocast without FSDP",
            casts="fsdp", grad_comm="fp32",
            source="pytorch/torchtitan@238fa995: models/llama3/infra/parallelize.py apply_fsdp "
            "(MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), the defaults of "
            "config/job_config.py mixed_precision_param / mixed_precision_reduce); distributed/utils.py "
            "maybe_enable_amp (torch.autocast only without FSDP)",
        ),
        Recipe.builtin(
            name="zero",
            description="fp16 weights and grads, fp32 master + Adam m, v (K = 12; 16 B/param)",
            compute="fp16", compute_weights="persistent", grads="fp16", grad_comm="fp16",
            activations="fp16",
            source="Rajbhandari et al. 2020, arXiv:1910.02054, Sec. 3.1",
        ),
        Recipe.builtin(
            name="megatron",
            description="bf16 weights, fp32 main grads, fp32 master + Adam m, v (18 B/param)",
            compute_weights="persistent",
            source="Korthikanti et al. 2022, arXiv:2205.05198 (Fig. 1 memory at 18 B/param)",
        ),
        Recipe.builtin(
            name="scaling-book",
            description="bf16 weights and fp32 Adam m, v only (10 B/param: 'params = HBM / 10')",
            compute_weights="persistent", master="none", grads="none",
            source="Austin et al. 2025, 'How to Scale Your Model', training chapter",
        ),
    ]
}

DEFAULT_RECIPE = "cs336"
