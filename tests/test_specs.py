"""Specs: every built-in model and shipped device validates; unknown fields are rejected."""

import dataclasses

import pytest
from pydantic import ValidationError

from costmodel.specs.catalog import BUILTIN_MODELS
from costmodel.specs.framework import FRAMEWORKS, Framework
from costmodel.specs.hardware import Hardware
from costmodel.specs.load import builtin_model, hardware_dir, hardware_fields, hardware_names, load_hardware, read_file
from costmodel.specs.model import FFNStack, Transformer
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
