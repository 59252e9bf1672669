"""What one pipeline stage holds on one device: layers, parameters (and its root), activations per token."""

from __future__ import annotations

from costmodel.formulas import activations as ac
from costmodel.mathops import exact_div, floor_div, indicator, maximum, minimum, where
from costmodel.parallel import data, expert, pipeline, tensor
from costmodel.parallel.pipeline import StageRole
from costmodel.record import record


@record
class Stage:
    """What one pipeline stage's device holds: its layers, parameters and saved activations."""

    role: StageRole
    layers: object
    params: object  # on one device, before data-axis sharding
    root_params: object  # of which outside the blocks (embeddings, final norm, output layer)
    activation_bytes_per_token: object  # one micro-batch token, times the micro-batches in flight (the output layer's
    # times its own: pipeline.output_in_flight)
    in_flight: object
    dense_layers: object = None  # of the layers, those with a dense MLP (None: all of them)
    expert_params: object = 0  # of the params, routed experts' (sharded over the experts' data group)
    copied_params: object = None  # matmul weights whose low-precision copy autocast saves (None: params)
    autocast: object = False  # the model runs under torch.autocast (parallel/data/state.runs_autocast)
    rerun_bytes_per_token: object = 0  # what one recomputed layer saves again during its backward, per token, beyond
    # the output layer's saved tensors (freed by then)
    rerun_copy_bytes: object = 0  # and, under autocast, the bf16 copies of its weights its matmuls save again

    @property
    def moe_layers(self):
        """The stage's MoE layers."""
        return 0 if self.dense_layers is None else self.layers - self.dense_layers


def dense_layers_on(shape, layers, start):
    """Of a stage's ``layers`` starting at layer ``start``, those among the model's first L_d dense ones."""
    if isinstance(shape.dense_layers, int) and shape.dense_layers == 0:
        return 0
    return minimum(maximum(shape.dense_layers - start, 0), layers)


def recomputed_layers(layers, point):
    """Layers whose forward reruns in backward: none, all ('full', and 'op' in part) or every K-th ('every'): the K-th, 2K-th, ...
    of the stage's layers, floor(L / K) of them (torchtitan's layer AC: a block is checkpointed when its running
    count is a multiple of ac_freq)."""
    if point.recompute in ("full", "op"):  # op: every block reruns its unsaved ops (formulas/op_checkpoint.py)
        return layers
    if point.recompute == "every":
        return floor_div(layers, point.recompute_layers)
    return 0


def stage(shape, recipe, point, role: StageRole) -> Stage:
    """The stage ``role`` of ``point`` on one device (replicated KV heads counted on every rank)."""
    shape = tensor.as_held(shape, point)
    layers = pipeline.stage_layers(shape.layers, point.pp, role, point.split, shape.split_costs())
    dense = None
    if shape.moe:
        start = pipeline.stage_start(shape.layers, point.pp, role, point.split, shape.split_costs())
        dense = dense_layers_on(shape, layers, start)
    routed = 0 if dense is None else (layers - dense) * expert.routed_params_per_layer(shape, point)
    params, root = tensor.stage_params_per_device(shape, layers=layers, first=role.first, last=role.last,
                                                  tp=point.tp, ends=point.tp_ends, dense_layers=dense)
    autocast = data.runs_autocast(recipe, point)
    if isinstance(autocast, bool):
        per_token, last, rerun = _saved_per_token(shape, recipe, point, role, layers, dense, autocast)
    else:  # arrays of shard counts under FSDP2's policy: autocast where the data axis does not shard weights
        (yes, last_yes, rerun_yes), (no, last_no, rerun_no) = (
            _saved_per_token(shape, recipe, point, role, layers, dense, flag) for flag in (True, False))
        per_token, last, rerun = (where(autocast, yes, no), where(autocast, last_yes, last_no),
                                  where(autocast, rerun_yes, rerun_no))
    flight = pipeline.in_flight(point, role)
    copied = copied_params(shape, point, layers, dense, role) if shape.attention else None
    # a rerun under autocast casts the layer's weights again, and its matmuls save the copies (not selective's core)
    recast = point.recompute in ("full", "every", "op") and shape.attention
    copies = (where(autocast, recipe.compute_bytes * layer_matmul_params(shape, point, not shape.moe), 0)
              * indicator(recomputed_layers(layers, point) >= 1)) if recast else 0
    saved = per_token * flight + last * pipeline.output_in_flight(point, role)  # the output layer's: its own count
    return Stage(role, layers, params + routed, root, saved, flight, dense, routed, copied, autocast,
                 rerun, copies)


def _saved_per_token(shape, recipe, point, role: StageRole, layers, dense, autocast: bool):
    """(The stage's saved bytes per micro-batch token on one device: kept layers whole, recomputed ones their
    input, the first stage's extras; the last stage's output-layer extras, per token; what one recomputed layer
    saves again in its backward, per token: its whole saved set less what it kept). ``autocast``: the model runs
    under torch.autocast (fp32 residual stream, a cast of each norm output per matmul)."""
    act = recipe.activation_bytes
    # under autocast the embedding output and the residual adds stay in the parameters' dtype (autocast lowers
    # matmuls, not adds or norms), so each norm saves an fp32 input; else the activations' dtype
    residual_bytes = recipe.master_bytes if autocast else act
    options = dict(act_bytes=act, tp=point.tp, sp=point.sp, selective=point.recompute == "selective",
                   flash=point.flash, norm_stats=point.norm_stats, eager=point.eager, autocast=autocast,
                   residual_bytes=residual_bytes, fused_swiglu=point.fused_swiglu)
    if shape.moe:
        options.update(routed_factor=expert.routed_factor(shape, point), etp=expert.expert_tp(point))
    whole = shape.layer_activation_bytes_per_token(**{**options, "selective": False})
    residual = residual_bytes if shape.attention else act  # the FFN stack's inputs are its matmuls' own
    layer_input = shape.layer_input_bytes_per_token(act_bytes=residual, tp=point.tp, sp=point.sp)
    if point.recompute == "op":  # torchtitan's per-op policy (dense blocks only: cost/shape_op.rules)
        kept = shape.op_layer_bytes_per_token(act_bytes=act, residual_bytes=residual_bytes, tp=point.tp, sp=point.sp)
        again, rerun = 0, ac.rerun_layer_bytes_per_token(whole=whole, kept=kept)
    else:
        kept = shape.layer_activation_bytes_per_token(**options)
        again = recomputed_layers(layers, point)
        rerun = ac.rerun_layer_bytes_per_token(whole=whole, kept=kept if point.recompute == "selective" else layer_input)
        rerun = rerun if point.recompute == "selective" else where(again >= 1, rerun, 0)
    per_token = (layers - again) * kept + again * layer_input
    if shape.moe:  # kept dense layers save a dense MLP's tensors, not the experts' ('every': the K-th, 2K-th, ...
        kept_dense = dense - recomputed_layers(dense, point)  # recomputed, as the collectives count them)
        per_token = per_token + kept_dense * (shape.layer_activation_bytes_per_token(**options, dense=True) - kept)
    per_token = per_token + role.first * shape.first_stage_extra_bytes_per_token(act_bytes=act, autocast=autocast)
    last = role.last * shape.last_stage_extra_bytes_per_token(act_bytes=act, tp=point.tp, norm_stats=point.norm_stats,
                                                              residual_bytes=residual_bytes, sp=point.sp)
    # the output layer's saved tensors are freed by the time backward reaches a layer: the rerun adds beyond them
    return per_token, last, maximum(rerun - last, 0)


def layer_matmul_params(shape, point, dense_layer: bool):
    """One layer's matmul weights on this device (no norms or biases; an MoE layer's routed experts included)."""
    layer = tensor.block_params_per_device(shape, point.tp, dense_layer)
    layer = layer - tensor.block_vector_params_per_device(shape, point.tp, dense_layer)
    return layer if dense_layer or not shape.moe else layer + expert.routed_params_per_layer(shape, point)


def copied_params(shape, point, layers, dense, role):
    """Matmul weights on this device whose autocast copy autograd saves: those of every layer it does
    not recompute (a checkpointed layer's forward runs without saving; its copies are made again in
    backward: Stage.rerun_copy_bytes), and the output layer's matrix on the last stage (tied: the embedding
    matrix it reads). (Autocast's cache also holds a checkpointed layer's copies until the forward leaves the
    autocast region: a transient at the forward's end, not counted.)"""
    kept = layers - recomputed_layers(layers, point)
    out = kept * layer_matmul_params(shape, point, not shape.moe)
    if shape.moe:  # kept dense layers: a dense MLP's matmuls ('every': each K-th recomputed, as in stage)
        out = out + (dense - recomputed_layers(dense, point)) * (layer_matmul_params(shape, point, True)
                                                                 - layer_matmul_params(shape, point, False))
    return out + role.last * tensor.vocab_rows_per_device(shape, point.tp, point.tp_ends) * shape.width


def activation_bytes(stage: Stage, point):
    """A: the stage's saved activations on one device, before data-axis sharding (tokens / c each)."""
    return stage.activation_bytes_per_token * exact_div(point.tokens, point.cp)
