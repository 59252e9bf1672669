"""Parameters one TP rank holds: blocks split t ways (less what every rank keeps whole), the ends.

Megatron (Shoeybi et al. 2019, arXiv:1909.08053, Sec. 3) splits Q, K, V and the first MLP matrices by
columns and the output projections by rows; norms and the row-parallel biases stay whole on every
rank. Vocabulary-parallel ends split the embedding and output matrix by rows of the vocabulary
(the first ranks hold ceil(V / t) rows, as torch DTensor's Shard(0) does); replicated ends keep them whole.
"""

from __future__ import annotations

from costmodel.mathops import ceil_div, exact_div


def block_params_per_device(shape, tp, dense: bool = False):
    """One block on one TP rank: (block - replicated) / t + replicated (the checks make t divide it).

    An MoE layer's (unless ``dense``) without its routed experts, which the expert axis places
    (:func:`costmodel.parallel.expert.routed_params_per_layer`); its shared experts split like an MLP.
    """
    replicated = shape.block_replicated_params(dense=dense)
    if shape.moe and not dense:
        return exact_div(shape.block_params() - shape.moe_parts()["experts"] - replicated, tp) + replicated
    return exact_div(shape.dense_block_params() - replicated, tp) + replicated


def block_vector_params_per_device(shape, tp, dense: bool = False):
    """Of one block on one TP rank, the parameters that are not matmul weights: norm weights (and
    Qwen3's per-head query/key norms, MLA's latent norms), whole on every rank, and biases (the column-
    parallel ones split t ways, the row-parallel ones whole). Autocast copies none of them: it lowers
    matmul weights only, and a linear's backward needs no copy of its bias."""
    if not shape.attention:
        return 0
    mlp_biases = (shape.bias or shape.mlp_bias) and (dense or not shape.moe)
    column = shape.head_dim * (shape.heads + 2 * shape.kv_heads) if (shape.bias or shape.qkv_bias) else 0
    if mlp_biases:
        column = column + (2 if shape.gated else 1) * shape.mlp_width
    row = ((shape.bias or shape.out_bias) + mlp_biases) * shape.width
    norms = shape.norms_per_layer * shape.norm_params() + (2 * shape.head_dim if shape.qk_norm else 0)
    if shape.mla:
        norms = norms + shape.kv_rank + (shape.q_rank if shape.q_latent else 0)
    return exact_div(column, tp) + row + norms


def vocab_rows_per_device(shape, tp, ends: str):
    """Rows of the embedding (or output) matrix on one TP rank."""
    return ceil_div(shape.vocab, tp) if ends == "vocab-parallel" else shape.vocab


def stage_params_per_device(shape, *, layers, first, last, tp, ends: str, dense_layers=None):
    """(all, root) parameters of a stage on one TP rank; ``first``/``last`` are 0/1 masks; of an MoE
    model's ``layers``, ``dense_layers`` have a dense MLP (routed experts not counted: the expert axis's).

    The root is what sits outside the blocks: the embeddings on the first stage, the final norm and
    output layer on the last. With tied embeddings and p > 1 the last stage keeps its own copy of the
    embedding matrix for the logits (Megatron's shared embedding, kept in sync by an all-reduce).
    """
    blocks = layers * block_params_per_device(shape, tp)
    if dense_layers is not None:
        blocks = blocks + dense_layers * (block_params_per_device(shape, tp, dense=True) - block_params_per_device(shape, tp))
    if not shape.attention:
        return blocks, 0
    matrix = vocab_rows_per_device(shape, tp, ends) * shape.width
    output = 0 if shape.tied else matrix
    root = first * (matrix + shape.position_params()) + last * (shape.norm_params() + output)
    if shape.tied:
        root = root + last * (1 - first) * matrix  # a last stage that is not also the first
    return blocks + root, root
