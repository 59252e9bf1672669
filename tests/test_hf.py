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
    # parallel blocks; the counts are transformers 5.23's models built on the meta device from these configs
    ("gpt-neox-20b.json", 20_554_567_680),  # two LayerNorms per layer, biases everywhere, untied
    ("falcon-7b.json", 6_921_720_704),  # one LayerNorm per layer, multi-query, no biases, tied
    ("falcon-40b.json", 41_303_293_952),  # new decoder architecture: ln_attn and ln_mlp, 8 KV heads
    # old architecture without multi_query: query_key_value is 3 D wide whatever num_kv_heads (8) says
    ("falcon-mha-kv8.json", 669_016_064),
    # Qwen2-MoE builds its shared expert's D -> 1 gate even when that expert is 0 wide
    ("qwen2-moe-no-shared.json", 2_766_161_920),
])
def test_other_families(fixture, count):
    assert total_params(load_model(str(HF / fixture))) == count


def test_unsupported_architecture_is_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 1024}))
    result = subprocess.run([sys.executable, "-m", "costmodel", "memory", "--model", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "model_type 'bloom' is not supported" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_key_is_named(tmp_path):
    config = json.loads((HF / "llama-3-8b.json").read_text())
    del config["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(CostModelError, match="missing 'intermediate_size'"):
        load_model(str(path))


@pytest.mark.parametrize("fixture, block, kv_heads", [("gpt-neox-20b.json", "parallel-two-norms", 64),
                                                       ("falcon-7b.json", "parallel", 1),
                                                       ("falcon-40b.json", "parallel-two-norms", 8)])
def test_parallel_families_read_their_block(fixture, block, kv_heads):
    model = load_model(str(HF / fixture))
    assert (model.block, model.kv_heads, model.mlp, model.norm) == (block, kv_heads, "gelu", "layernorm")


def test_falcon_rw_key_names(tmp_path):
    """Older Falcon configs (RWConfig) spell n_head, n_layer, n_head_kv: transformers' attribute_map."""
    config = json.loads((HF / "falcon-40b.json").read_text())
    for new, old in (("num_attention_heads", "n_head"), ("num_hidden_layers", "n_layer"), ("num_kv_heads", "n_head_kv")):
        config[old] = config.pop(new)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert total_params(load_model(str(path))) == 41_303_293_952


@pytest.mark.parametrize("changes, block", [({"num_ln_in_parallel_attn": 1}, "parallel"),
                                            ({"parallel_attn": False, "new_decoder_architecture": False}, "sequential")])
def test_falcon_block_follows_transformers(tmp_path, changes, block):
    """FalconDecoderLayer: one input_layernorm when num_ln_in_parallel_attn is 1 (Falcon2-11B), a sequential
    block without parallel_attn. With one norm the count is transformers' 5.23 model's from this config
    (41,302,310,912: one LayerNorm, weight and bias, fewer per layer)."""
    config = {**json.loads((HF / "falcon-40b.json").read_text()), **changes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = load_model(str(path))
    assert model.block == block
    if block == "parallel":
        assert total_params(model) == 41_302_310_912


def test_a_config_is_named_after_its_model_not_its_folder(tmp_path):
    """transformers' save_pretrained writes _name_or_path: that names the model; a config in the hub's cache
    (models--ORG--NAME/snapshots/HASH/config.json) is ORG/NAME, not the snapshot's hash; elsewhere, the path as
    given (not its folder: path/to/config.json is no model called 'to')."""
    import json

    from costmodel.inputs.bounds import NAME
    from costmodel.specs.load import load_model

    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 512,
              "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
              "vocab_size": 1000, "max_position_embeddings": 512}
    cached = tmp_path / "models--meta-llama--Llama-3.1-8B" / "snapshots" / ("0" * 40)
    cached.mkdir(parents=True)
    (cached / "config.json").write_text(json.dumps(config))
    assert load_model(str(cached / "config.json")).name == "meta-llama/Llama-3.1-8B"
    saved = tmp_path / "checkpoint-100"
    saved.mkdir()
    (saved / "config.json").write_text(json.dumps({**config, "_name_or_path": "my-org/tiny-llama"}))
    assert load_model(str(saved / "config.json")).name == "my-org/tiny-llama"
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "config.json").write_text(json.dumps(config))
    plain = str(tmp_path / "plain" / "config.json")
    assert load_model(plain).name == (plain if len(plain) <= NAME else "..." + plain[len(plain) - NAME + 3:])
    assert load_model(plain).name.endswith("plain/config.json")


def test_a_folder_holding_a_config_names_the_model(tmp_path, monkeypatch):
    """--model FOLDER reads FOLDER/config.json (a downloaded model's folder); a name no file has stays unknown."""
    import json

    from costmodel.errors import CostModelError
    from costmodel.specs.load import load_model

    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 512,
              "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
              "vocab_size": 1000, "max_position_embeddings": 512}
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    assert load_model("mymodel").name == load_model("mymodel/").name == "mymodel/config.json"
    for name in ("notthere", "bad\0name"):
        with pytest.raises(CostModelError, match="unknown model"):
            load_model(name)
