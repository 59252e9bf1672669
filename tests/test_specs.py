"""Specs: every built-in model and shipped device validates; unknown fields are rejected."""

import dataclasses
import subprocess
import sys

import pytest
from pydantic import ValidationError

from costmodel.specs.catalog import BUILTIN_MODELS
from costmodel.specs.framework import Framework
from costmodel.specs.framework_catalog import FRAMEWORKS
from costmodel.specs.hardware import Hardware
from costmodel.specs.load import builtin_model, hardware_dir, hardware_fields, hardware_names, load_hardware, read_file
from costmodel.specs.model import FFNStack, MoE, Transformer
from costmodel.specs.recipe import RECIPES, Recipe


@pytest.mark.parametrize("name", list(BUILTIN_MODELS))
def test_builtin_models_validate_and_construct_alike(name):
    """load_model skips validation for built-ins (speed); validating gives the very same spec."""
    data = BUILTIN_MODELS[name]
    validated = {"ffn": FFNStack, "transformer": Transformer}[data["kind"]].model_validate(data)
    assert validated == builtin_model(name)
    assert validated.source


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipes_validate(name):
    """Shipped recipes are built without validation (Spec.builtin, for the cold start); validating gives the same."""
    assert Recipe.model_validate(RECIPES[name].model_dump()) == RECIPES[name]


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_frameworks_validate(name):
    """Shipped framework profiles, nested fitted times included, validate to the very same spec."""
    assert Framework.model_validate(FRAMEWORKS[name].model_dump()) == FRAMEWORKS[name]


@pytest.mark.parametrize("name", hardware_names())
def test_shipped_devices_load_as_they_validate(name):
    """load_hardware builds a shipped device without validation (speed); validating its file gives the same."""
    validated, loaded = Hardware.model_validate(hardware_fields(hardware_dir() / f"{name}.toml")), load_hardware(name)
    assert validated == loaded  # where the loader read it (_folder) is not compared
    assert repr(validated.model_dump()) == repr(loaded.model_dump())  # the same types too (floats stay floats)


def test_every_shipped_device_loads_with_sources():
    names = hardware_names()
    assert len(names) >= 10
    for name in names:
        spec = load_hardware(name)
        assert spec.name == name
        assert spec.peak_flops.source and spec.hbm.source and all(level.source for level in spec.network)


def test_unknown_fields_are_rejected():
    data = read_file(hardware_dir() / "h100-sxm.toml")
    data["hbm"]["colour"] = "green"
    with pytest.raises(ValidationError, match="colour"):
        Hardware.model_validate(data)
    with pytest.raises(ValidationError):
        FFNStack(name="x", d_model=1, d_ff=1, layers=1, width=3)


def test_specs_are_frozen():
    spec = FFNStack.model_validate(BUILTIN_MODELS["xxl"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.layers = 3


def test_an_extension_with_another_capacity_drops_the_bases_usable_and_marketed_sizes(tmp_path):
    """A 100 GB variant of h100-sxm keeps neither its usable 81,559 MiB nor its '80 GB' unless it says them."""
    path = tmp_path / "my.toml"
    path.write_text('extends = "h100-sxm"\nname = "my-h100"\n[hbm]\ncapacity_bytes = 100000000000\n')
    spec = load_hardware(str(path))
    assert (spec.hbm.capacity_bytes, spec.hbm.usable_bytes, spec.hbm.marketed_gb) == (10**11, None, None)
    assert spec.hbm.bandwidth_bytes_per_s == load_hardware("h100-sxm").hbm.bandwidth_bytes_per_s
    path.write_text('extends = "h100-sxm"\nname = "my-h100"\n[hbm]\ncapacity_bytes = 100000000000\n'
                    'usable_bytes = 99000000000\n')
    assert load_hardware(str(path)).hbm.usable_bytes == 99 * 10**9


def test_a_spec_built_directly_is_validated_and_nested_specs_may_be_specs_or_tables():
    """Spec(...) validates as a pydantic model's constructor does; builtin() and model_copy() do not (trusted)."""
    moe = {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}
    fields = dict(name="t", hidden=512, ffn_hidden=1024, layers=4, heads=8, kv_heads=8, vocab=1000, seq_len=256)
    from_table, from_spec = Transformer(**fields, moe=moe), Transformer(**fields, moe=MoE(**moe))
    assert from_table == from_spec == Transformer.builtin(**fields, moe=moe) and isinstance(from_table.moe, MoE)
    with pytest.raises(ValidationError, match="top_k=9 is more than experts=8"):
        Transformer(**fields, moe={**moe, "top_k": 9})
    with pytest.raises(ValidationError, match="greater than 0"):
        FFNStack(name="x", d_model=0, d_ff=1, layers=1)
    assert from_table.model_copy(update={"layers": 0}).layers == 0  # a copy is not validated, as pydantic's is not
    assert Transformer.model_validate_json(from_table.model_dump_json()) == from_table
    assert from_table.model_dump(exclude={"moe"}).keys() == Transformer.model_fields.keys() - {"moe"}
    assert Transformer.model_fields["hidden"].description.startswith("D = h")


@pytest.mark.slow
def test_the_numeric_path_builds_no_validating_model_for_shipped_specs():
    code = ("import sys\nfrom costmodel.cli import main\nsys.argv = ['cost4d'] + sys.argv[1:]\ntry:\n    main()\n"
            "except SystemExit:\n    pass\nprint('costmodel.specs.validation' in sys.modules, file=sys.stderr)")
    for args in (["step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192"],
                 ["memory", "--model", "mixtral-8x7b", "--framework", "nanotron", "--hardware", "aws-p5"]):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr.strip().splitlines()[-1] == "False", done.stderr


def test_dataclasses_replace_on_a_loaded_spec_validates_and_keeps_where_it_was_read():
    loaded = load_hardware("h100-sxm")
    renamed = dataclasses.replace(loaded, name="mine")
    assert renamed.name == "mine" and renamed._folder == loaded._folder and renamed.hbm == loaded.hbm
    with pytest.raises(ValidationError):
        dataclasses.replace(loaded, name="")


#: each shipped device's kind, from its vendor: what `cost4d hardware` prints and what pricing branches on
#: (tpu: the ICI torus; gpu: a switched domain + scale-out, NCCL's tuner where [nccl] says; trainium: AWS's own
#: chip and collective library, priced as a domain + scale-out without NCCL's tuner)
KINDS = {"a100-80gb": "gpu", "aws-p4de": "gpu", "aws-p5": "gpu", "b200": "gpu", "h100-96gb-500w": "gpu",
         "h100-sxm": "gpu", "h200": "gpu", "mi325x": "gpu", "tpu-v4": "tpu", "tpu-v5e": "tpu", "tpu-v5p": "tpu",
         "tpu-v6e": "tpu", "trn2": "trainium"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_shipped_device_kinds(name):
    """AWS Trainium2 is no GPU (AWS Neuron docs, 'Trainium2 Architecture'); the rest are their vendors' GPUs and TPUs."""
    assert load_hardware(name).kind == KINDS[name]


def test_trainium_is_priced_as_a_domain_plus_scale_out_and_named_as_such():
    """trn2 keeps the per-level TP thresholds a switched domain has (TP within NeuronLink, TP across EFA), and the
    TPU-only options name it a Trainium chip."""
    from costmodel.solve.thresholds import single_strategy_thresholds

    trn2 = load_hardware("trn2")
    rows = single_strategy_thresholds(trn2, d_ff=28672, peak_flops=667e12, bandwidth=25e9)
    assert [r.strategy for r in rows] == ["DP/FSDP within one neuronlink domain", "TP within one neuronlink domain",
                                          "DP/FSDP across nodes (efa)", "TP across nodes (efa)"]
    # 28,672 / (667e12 / 512e9): the Scaling Book's F / alpha on NeuronLink
    assert rows[1].value == pytest.approx(28672 / (667e12 / 512e9))
    assert trn2.kind_name == "Trainium chip"
    data = read_file(hardware_dir() / "trn2.toml") | {"nccl": read_file(hardware_dir() / "h100-sxm.toml")["nccl"]}
    with pytest.raises(ValidationError, match="NCCL's tuner"):
        Hardware.model_validate(data)
