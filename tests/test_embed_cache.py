import numpy as np
import torch

from csebench.embed_cache import caching_encode, model_fingerprint


def _model(tmp_path, content=b"weights"):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "model.safetensors").write_bytes(content)
    return d


def test_each_sentence_encoded_once_across_calls_and_processes(tmp_path):
    calls = []

    def encode(sents):
        calls.append(list(sents))
        return torch.tensor([[len(s), s.count("a")] for s in sents], dtype=torch.float32)

    model = _model(tmp_path)
    enc = caching_encode(encode, model, tmp_path / "cache", settings={"pooler": "cls"})
    a = enc(["a b", "aaa", "a b"])
    assert calls == [["a b", "aaa"]]
    b = enc(["aaa", "zz", "a b"])  # only the new sentence is encoded
    assert calls[-1] == ["zz"]
    assert torch.equal(b, encode(["aaa", "zz", "a b"]))
    assert torch.equal(a, encode(["a b", "aaa", "a b"]))
    # a second wrapper (another process) reads the shards: nothing to encode
    n = len(calls)
    enc2 = caching_encode(encode, model, tmp_path / "cache", settings={"pooler": "cls"})
    assert torch.equal(enc2(["zz", "aaa"]), encode(["zz", "aaa"]))
    assert len(calls) == n + 1  # only the direct reference call; enc2 encoded nothing


def test_key_changes_with_weights_and_settings(tmp_path):
    seen = []

    def encode(sents):
        seen.append(len(sents))
        return torch.zeros(len(sents), 3)

    model = _model(tmp_path)
    f1 = model_fingerprint(model)
    caching_encode(encode, model, tmp_path / "c", settings="cls")(["x"])
    caching_encode(encode, model, tmp_path / "c", settings="avg")(["x"])  # other pooler: not reused
    assert seen == [1, 1]
    import os, time
    time.sleep(0.01)
    (model / "model.safetensors").write_bytes(b"retrained")
    os.utime(model / "model.safetensors")
    assert model_fingerprint(model) != f1
    caching_encode(encode, model, tmp_path / "c", settings="cls")(["x"])  # new weights: encoded again
    assert seen == [1, 1, 1]
