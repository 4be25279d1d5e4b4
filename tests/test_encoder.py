import torch

from csebench.model.encoder import load_encoder, masked_mean, pool


def _hidden(n_layers=3, b=2, t=4, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, t, d, generator=g) for _ in range(n_layers + 1))


def test_poolers_against_direct_formulas():
    hs = _hidden()
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])

    def mean(h, i):
        n = int(mask[i].sum())
        return h[i, :n].mean(0)

    for i in range(2):
        assert torch.allclose(pool("cls", hs, mask)[i], hs[-1][i, 0])
        assert torch.allclose(pool("cls_before_pooler", hs, mask)[i], hs[-1][i, 0])
        assert torch.allclose(pool("avg", hs, mask)[i], mean(hs[-1], i), atol=1e-6)
        assert torch.allclose(pool("avg_first_last", hs, mask)[i], (mean(hs[1], i) + mean(hs[-1], i)) / 2, atol=1e-6)
        assert torch.allclose(pool("avg_top2", hs, mask)[i], (mean(hs[-2], i) + mean(hs[-1], i)) / 2, atol=1e-6)
        # intermediate layer pooled the same way
        assert torch.allclose(pool("avg", hs, mask, layer=2)[i], mean(hs[2], i), atol=1e-6)


def test_masked_mean_ignores_padding():
    h = torch.ones(1, 3, 2)
    h[0, 2] = 100.0
    assert torch.allclose(masked_mean(h, torch.tensor([[1, 1, 0]])), torch.ones(1, 2))


def test_mlp_head_only_in_training(tiny_encoder):
    enc = tiny_encoder("cls")
    ids = enc.tokenizer(["hello world"], return_tensors="pt")
    enc.eval()
    with torch.no_grad():
        trained = enc(ids["input_ids"], ids["attention_mask"], train_head=True)
        raw = enc(ids["input_ids"], ids["attention_mask"], train_head=False)
    assert not torch.allclose(trained, raw)
    assert torch.allclose(torch.tanh(enc.head.dense(raw)), trained, atol=1e-6)


def test_encode_dedups_sorts_and_matches_unbatched(tiny_encoder):
    enc = tiny_encoder("avg")
    sents = ["a b c d e f", "x", "a b c d e f", "hello there world", "x"]
    out = enc.encode(sents, batch_size=2)
    assert out.shape == (5, enc.hidden_size)
    enc.eval()
    for i, s in enumerate(sents):
        t = enc.tokenizer([s], return_tensors="pt")
        with torch.no_grad():
            ref = enc(t["input_ids"], t["attention_mask"], train_head=False)[0]
        assert torch.allclose(out[i], ref, atol=1e-5)


def test_save_and_load_roundtrip_and_sentence_transformers(tiny_encoder, tmp_path):
    enc = tiny_encoder("cls")
    enc.save(tmp_path / "model")
    loaded = load_encoder(tmp_path / "model")
    assert loaded.pooler == "cls_before_pooler"
    sents = ["a sentence", "another longer sentence here"]
    assert torch.allclose(enc.encode(sents), loaded.encode(sents), atol=1e-5)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert torch.allclose(torch.as_tensor(st.encode(sents)), enc.encode(sents), atol=1e-4)


def test_default_encode_batch_size_is_smaller_on_cpu(tiny_encoder):
    from csebench.model.encoder import CPU_ENCODE_BATCH, GPU_ENCODE_BATCH, default_encode_batch_size

    assert default_encode_batch_size("cpu") == CPU_ENCODE_BATCH == 64
    assert default_encode_batch_size(torch.device("cuda", 0)) == GPU_ENCODE_BATCH == 128
    enc = tiny_encoder()
    sents = [f"sentence number {i} " + "word " * (i % 9) for i in range(150)]
    # None takes the device's default; the rows do not depend on the batch size
    assert torch.allclose(enc.encode(sents), enc.encode(sents, batch_size=7), atol=1e-5)


def test_position_limit_of_roberta_like_models():
    from types import SimpleNamespace

    from csebench.model.encoder import max_positions

    assert max_positions(SimpleNamespace(max_position_embeddings=514, model_type="roberta")) == 512
    assert max_positions(SimpleNamespace(max_position_embeddings=512, model_type="bert")) == 512
    assert max_positions(SimpleNamespace(model_type="t5")) is None
