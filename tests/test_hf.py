"""Hugging Face config.json import: counts from the published model cards, clear errors otherwise."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.specs.load import load_model
from costmodel.cost.shape import Shape


def param_parts(model):
    return Shape.of(model).param_parts()


def total_params(model):
    return Shape.of(model).total_params()

HF = Path(__file__).parent / "fixtures" / "hf"


def test_llama3_8b_per_component():
    """8,030,261,248 (Meta's release; HF model card). Components derived by hand below."""
    model = load_model(str(HF / "llama-3-8b.json"))
    V, D, F, L, kv = 128256, 4096, 14336, 32, 8 * 128
    assert param_parts(model) == {
        "embedding": V * D,  # untied: a separate output matrix below
        "attention": L * (2 * D * D + 2 * D * kv),  # q, o: D x D; k, v: D x (8 heads x 128)
        "mlp": L * 3 * D * F,  # gate, up, down
        "norms": (2 * L + 1) * D,  # two RMSNorms per layer and the final one
        "output": V * D,
    }
    assert total_params(model) == 8_030_261_248


@pytest.mark.parametrize("fixture, count", [
    ("mistral-7b-v0.1.json", 7_241_732_096),  # HF model card: 7.24B
    ("qwen2-7b.json", 7_615_616_512),  # HF model card: 7.62B; Q, K, V carry biases
])
def test_other_families(fixture, count):
    assert total_params(load_model(str(HF / fixture))) == count


def test_unsupported_architecture_is_one_line():
    result = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", str(HF / "gpt-neox-20b.json")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "model_type 'gpt_neox' is not supported" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_key_is_named(tmp_path):
    config = json.loads((HF / "llama-3-8b.json").read_text())
    del config["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(CostModelError, match="missing 'intermediate_size'"):
        load_model(str(path))
