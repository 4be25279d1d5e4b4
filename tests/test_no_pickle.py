"""No file runs code. Checkpoints and the MLP head are safetensors + JSON; a crafted
pickle (one that creates a file when unpickled) is refused, and the file does not appear."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from runhelpers import (ROOT, SHARED, STS_FAST, assert_fails, ci_training, run_cli, train_argv, write_config,
                        write_corpus, write_mini_senteval)


class _CreatesFile:
    """Unpickling this object calls open(path, "w"): the file appearing means the pickle ran code."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _write_evil_pickle(path: Path, marker: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": {"step": 2}, "payload": _CreatesFile(marker)}, path)
    # the test's own check that the file is what it claims: unpickling it creates the marker
    torch.load(path, weights_only=False)["payload"].close()
    assert marker.exists()
    marker.unlink()


def test_a_pickled_checkpoint_is_never_loaded(tmp_path, capsys, caplog):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    out, marker = tmp_path / "run", tmp_path / "pwned"
    _write_evil_pickle(out / "checkpoint" / "trainer.pt", marker)  # an older csebench's checkpoint, or a planted one
    cfg = write_config(tmp_path / "a.yaml", ci_training(max_steps=2, eval_steps=2, batch_size=8, eval_batch_size=64))
    with caplog.at_level(logging.WARNING, logger="csebench.training.trainer"):
        rc, err = run_cli(capsys, train_argv(tmp_path, out, cfg))
    assert rc == 0, err
    assert not marker.exists()
    assert (f"checkpoint {out / 'checkpoint'} has no manifest.json (a pickle from an older csebench: never loaded, "
            "it could run code); starting over") in caplog.text
    assert json.loads((out / "train_timing.json").read_text())["resumed_from_step"] is None


def _model_with_head(tmp_path: Path) -> Path:
    """A saved run's model whose training head is kept at evaluation (SSCL's projection runs)."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder

    enc = build_encoder(BackboneConfig(model="random", pooler="cls"), projection_dim=16)
    enc.save(tmp_path / "model")
    return tmp_path / "model"


def test_head_weights_are_safetensors_and_load_back(tmp_path):
    import torch

    from csebench.model.encoder import load_encoder

    model = _model_with_head(tmp_path)
    assert (model / "mlp_head.safetensors").is_file() and not (model / "mlp_head.pt").exists()
    enc = load_encoder(model)
    assert enc.head is not None and enc.encode(["a sentence ."]).shape == (1, 16)
    assert torch.isfinite(enc.encode(["another one ."])).all()


def test_a_pickled_mlp_head_is_refused(tmp_path, capsys):
    model = _model_with_head(tmp_path)
    (model / "mlp_head.safetensors").unlink()
    marker = tmp_path / "pwned"
    _write_evil_pickle(model / "mlp_head.pt", marker)
    out = tmp_path / "sts.json"
    assert_fails(capsys, ["eval-sts", "--model", str(model), "--senteval", str(SHARED / "senteval"), "--out", str(out)],
                 f"{model / 'mlp_head.pt'} is a pickle (older csebench), which can run code when loaded",
                 "csebench reads mlp_head.safetensors only", outputs=[out])
    assert not marker.exists()


def test_the_distillation_analysis_refuses_a_pickled_head_too(tmp_path, tiny_encoder):
    from csebench.analysis.distill import attach_training_head
    from csebench.model.encoder import load_encoder
    from csebench.core.errors import ConfigError

    tiny_encoder().save(tmp_path / "model")  # cls pooler: the head is saved, not used at evaluation
    model = tmp_path / "model"
    assert attach_training_head(load_encoder(model), str(model))
    (model / "mlp_head.safetensors").unlink()
    marker = tmp_path / "pwned"
    _write_evil_pickle(model / "mlp_head.pt", marker)
    with pytest.raises(ConfigError, match="is a pickle"):
        attach_training_head(load_encoder(model), str(model))
    assert not marker.exists()


def _unsafe_calls(tree) -> list[tuple[int, str]]:
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            found += [(node.lineno, f"import {n}") for n in names if n.split(".")[0] in ("pickle", "cPickle", "dill", "joblib")]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
        keywords = {k.arg: k.value for k in node.keywords}
        call = f"{owner}.{node.func.attr}"
        if call == "torch.load" or call in ("yaml.unsafe_load", "yaml.full_load"):
            found.append((node.lineno, call))
        elif call == "yaml.load" and getattr(keywords.get("Loader"), "id", None) != "UniqueKeyLoader":
            found.append((node.lineno, "yaml.load without UniqueKeyLoader"))
        elif call in ("np.load", "numpy.load") and getattr(keywords.get("allow_pickle"), "value", False) is not False:
            found.append((node.lineno, "np.load(allow_pickle=...)"))
        elif node.func.attr == "extractall" and getattr(keywords.get("filter"), "value", None) != "data" and not (
                isinstance(keywords.get("members"), ast.Call) and getattr(keywords["members"].func, "id", None) == "_checked_members"):
            # (Python 3.11.0-3.11.3 has no filters: there the members csebench.training.data._checked_members vets)
            found.append((node.lineno, 'extractall without filter="data" or _checked_members'))
    return found


def test_no_pickle_loading_anywhere_in_the_code():
    """torch.load, pickle, numpy's allow_pickle: none in src/ or benchmarks/; what already held still
    holds (YAML through the safe loader, tar extraction with filter="data" or vetted members)."""
    import ast

    found = []
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{n}: {what}" for n, what in _unsafe_calls(tree)]
    assert not found, "\n".join(found)
    # the check itself catches what it looks for
    assert len(_unsafe_calls(ast.parse("import pickle\ntorch.load(f, weights_only=True)\nnp.load(f, allow_pickle=True)\n"
                                       "yaml.load(t, Loader=yaml.Loader)\ntar.extractall(d)\n"
                                       "tar.extractall(d, members=tar.getmembers())\n"))) == 6


def test_a_pickled_pytorch_model_bin_is_refused_in_one_line(tmp_path, capsys, tiny_encoder, small):
    """A pickle saved as pytorch_model.bin ended in an UnpicklingError whose text advised weights_only=False."""
    import pickle

    model = tmp_path / "model"
    tiny_encoder("avg").save(model)
    (model / "model.safetensors").unlink()
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"embeddings.word_embeddings.weight": Planted()}))
    out = tmp_path / "out" / "sts.json"
    line = assert_fails(capsys, ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out)],
                        f"{model / 'pytorch_model.bin'} is a pickle holding more than tensors, which could run code when "
                        "loaded: csebench refuses it (torch's safe loader, weights_only=True, stopped at it)",
                        outputs=[out.parent])
    assert "weights_only=False" not in line and not marker.exists()
