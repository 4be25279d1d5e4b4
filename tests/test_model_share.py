"""Issue 22 part 3: saved models load cleanly, carry a model card, and `csebench push` uploads them."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from csebench.config import BackboneConfig
from csebench.encoder import build_encoder

SENTS = ["a sentence", "another longer sentence here"]

LOAD = textwrap.dedent("""
    import sys, torch
    from safetensors.torch import load_file
    from transformers import AutoModel
    from sentence_transformers import SentenceTransformer
    folder = sys.argv[1]
    SENTS = sys.argv[3:]
    model, info = AutoModel.from_pretrained(folder, output_loading_info=True)
    print("INFO", sorted((k, sorted(v)) for k, v in info.items() if k != "error_msgs"))
    st = SentenceTransformer(folder, device="cpu")
    torch.save({"st": torch.as_tensor(st.encode(SENTS)), "pooler": model.pooler.dense.weight.detach()}, sys.argv[2])
""")


def _load_like_a_user(folder, tmp_path) -> tuple[str, dict]:
    """AutoModel and SentenceTransformer in a fresh interpreter at the libraries' default verbosity, as a
    user runs them (the CLI silences transformers' load reports in its own process): everything printed."""
    script = tmp_path / "load.py"
    script.write_text(LOAD)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="warning")
    proc = subprocess.run([sys.executable, str(script), str(folder), str(tmp_path / "out.pt"), *SENTS], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr, torch.load(tmp_path / "out.pt")


@pytest.mark.parametrize("backbone, pooler, projection", [("packaged:minilm", "cls", None), ("random", "avg", 8)])
def test_saved_model_loads_without_missing_or_unexpected_weights(tmp_path, backbone, pooler, projection):
    torch.manual_seed(0)
    enc = build_encoder(BackboneConfig(model=backbone, pooler=pooler), projection_dim=projection)
    enc.save(tmp_path / "model")
    printed, out = _load_like_a_user(tmp_path / "model", tmp_path)
    assert "INFO [('mismatched_keys', []), ('missing_keys', []), ('unexpected_keys', [])]" in printed, printed
    for word in ("MISSING", "UNEXPECTED", "newly initialized", "not initialized", "not used"):
        assert word not in printed, printed
    # SentenceTransformer gives the evaluated embedding (with the projection head: its Dense module)
    assert torch.allclose(out["st"], enc.encode(SENTS), atol=1e-4)
    if pooler == "cls":  # pooler_output is the trained MLP head, as in SimCSE's released checkpoints
        assert torch.equal(out["pooler"], enc.head.dense.weight.detach())
    else:  # the backbone's own pooler (a random BERT's: drawn from the seed)
        assert torch.equal(out["pooler"], enc.backbone.pooler_weights["pooler.dense.weight"])


def test_the_kept_pooler_changes_neither_the_encoder_state_nor_the_rng(tokenizer):
    from csebench.encoder import build_backbone

    torch.manual_seed(3)
    before = torch.get_rng_state()
    model = build_backbone(BackboneConfig(model="packaged:minilm"), tokenizer)
    assert torch.equal(before, torch.get_rng_state())
    assert model.pooler is None and not any(k.startswith("pooler.") for k in model.state_dict())
    assert set(model.pooler_weights) == {"pooler.dense.weight", "pooler.dense.bias"}
