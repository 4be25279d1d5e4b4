"""Analysis metrics on inputs with known answers, plus the model-level functions on a tiny encoder."""

import math

import numpy as np
import pytest
import torch

from csebench.analysis import measures as M


# ------------------------------------------------------------------ Wang & Isola

def test_alignment_identical_pairs_is_zero_and_antipodal_is_four():
    x = torch.randn(10, 8)
    assert M.alignment(x, 3.0 * x) == pytest.approx(0.0, abs=1e-12)  # scale-free: normalized first
    assert M.alignment(x, -x) == pytest.approx(4.0)  # ||x - (-x)||^2 = 4 on the unit sphere
    e = torch.eye(4)
    assert M.alignment(e, e.roll(1, 0)) == pytest.approx(2.0)  # orthogonal unit vectors: distance^2 = 2
    assert M.alignment(e, e.roll(1, 0), alpha=1) == pytest.approx(math.sqrt(2))


def test_uniformity_known_values():
    # d orthonormal vectors: every pair at squared distance 2 -> log exp(-2 * 2) = -4
    assert M.uniformity(torch.eye(5) * 7.0) == pytest.approx(-4.0)
    # two antipodal points: squared distance 4 -> -8
    assert M.uniformity(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-8.0)
    # identical points: log 1 = 0 (the worst uniformity)
    assert M.uniformity(torch.ones(6, 3)) == pytest.approx(0.0, abs=1e-12)
    # t is the temperature of the Gaussian potential
    assert M.uniformity(torch.eye(5), t=1.0) == pytest.approx(-2.0)


def test_uniformity_matches_wang_isola_reference():
    x = torch.nn.functional.normalize(torch.randn(50, 16), dim=-1)
    ref = torch.pdist(x.double(), p=2).pow(2).mul(-2).exp().mean().log()
    assert M.uniformity(x) == pytest.approx(float(ref), rel=1e-6)


# ------------------------------------------------------------------ SSCL

def test_inter_layer_similarity_identical_and_orthogonal_layers():
    a = torch.randn(7, 6, dtype=torch.float64)
    b = torch.randn(7, 6, dtype=torch.float64)
    b = b - (b * a).sum(-1, keepdim=True) / (a * a).sum(-1, keepdim=True) * a  # b_i orthogonal to a_i
    out = M.inter_layer_similarity([a, 2 * a, b, -b])
    np.testing.assert_allclose(out, [1.0, 0.0, -1.0], atol=1e-9)


def test_toksim_identical_tokens_and_orthogonal_tokens_with_padding():
    h = torch.zeros(3, 4, 5)
    h[0, :3] = torch.tensor([1.0, 2, 0, 0, 0])  # 3 identical tokens -> 1
    h[1, :4] = torch.eye(5)[:4]                 # 4 orthogonal tokens -> 0
    h[2, 0] = 1.0                               # single token -> undefined
    h[0, 3] = torch.tensor([0, 0, 0, 0, 9.0])   # padding, masked out
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    out = M.toksim(h, mask)
    assert out[0] == pytest.approx(1.0) and out[1] == pytest.approx(0.0, abs=1e-12) and np.isnan(out[2])


def test_toksim_matches_pairwise_definition():
    h = torch.randn(1, 6, 4)
    x = torch.nn.functional.normalize(h[0].double(), dim=-1)
    c = x @ x.T
    ref = (c.sum() - c.trace()) / (6 * 5)
    assert M.toksim(h, torch.ones(1, 6))[0] == pytest.approx(float(ref))


# ------------------------------------------------------------------ GS-InfoNCE

# A hand-made batch: sentences with these exact cosines (rows of the Cholesky factor of the matrix).
BATCH_COSINES = [[1.0, 0.9, 0.5, 0.1, 0.1],
                 [0.9, 1.0, 0.3, 0.2, 0.2],
                 [0.5, 0.3, 1.0, 0.4, 0.3],
                 [0.1, 0.2, 0.4, 1.0, 0.6],
                 [0.1, 0.2, 0.3, 0.6, 1.0]]


def batch_with_cosines(n: int) -> torch.Tensor:
    return torch.linalg.cholesky(torch.tensor(BATCH_COSINES, dtype=torch.float64)[:n, :n])


def test_topk_negatives_is_the_papers_per_sentence_top_k_of_a_hand_made_batch():
    """GS-InfoNCE v1: the N x N matrix, diagonal masked, each column sorted, its top k rows, each row's mean."""
    four = batch_with_cosines(4)
    # sentences' nearest others: s0 .9 .5 .1 | s1 .9 .3 .2 | s2 .5 .4 .3 | s3 .4 .2 .1
    np.testing.assert_allclose(M.topk_neighbour_similarities(four, k=3), [0.675, 0.35, 0.175], atol=1e-12)
    np.testing.assert_allclose(M.topk_neighbour_similarities(four, k=2), [0.675, 0.35], atol=1e-12)
    # the paper's top 4 needs five sentences: s0 .9 .5 .1 .1 | s1 .9 .3 .2 .2 | s2 .5 .4 .3 .3 | s3 .6 .4 .2 .1
    # | s4 .6 .3 .2 .1
    five = batch_with_cosines(5)
    np.testing.assert_allclose(M.topk_neighbour_similarities(five, k=4), [0.70, 0.38, 0.20, 0.16], atol=1e-12)
    # not the batch's 4 largest pair cosines (.9 .6 .5 .4), what this analysis computed before
    assert not np.allclose(M.topk_neighbour_similarities(five, k=4), [0.9, 0.6, 0.5, 0.4])
    # batched: any order of the same sentences, and two batches of the pool at once
    batched = M.topk_neighbours_batched(five, np.array([[0, 1, 2, 3, 4], [4, 2, 0, 3, 1], [0, 1, 2, 3, 3]]), k=2)
    np.testing.assert_allclose(batched[:2], [[0.70, 0.38], [0.70, 0.38]], atol=1e-12)
    # a sentence twice in a batch is its own copy's nearest neighbour: cosine 1 (s3's copy), the diagonal masked
    assert batched[2, 0] == pytest.approx((0.9 + 0.9 + 0.5 + 1.0 + 1.0) / 5)
    with pytest.raises(ValueError, match="more than 4 sentences"):
        M.topk_neighbour_similarities(four, k=4)


def test_topk_noise_side_matches_a_loop():
    g = torch.Generator().manual_seed(3)
    emb, noise = torch.randn(10, 6, generator=g), torch.randn(2, 9, 6, generator=g, dtype=torch.float64)
    idx = np.array([[0, 3, 5, 7], [9, 1, 2, 4]])
    expected = []
    for r in range(2):  # each sentence: its k largest cosines to the batch's noise, each rank averaged over sentences
        per = [sorted((float(torch.nn.functional.cosine_similarity(emb[i].double(), v, dim=0)) for v in noise[r]),
                      reverse=True)[:3] for i in idx[r]]
        expected.append(np.mean(per, axis=0))
    np.testing.assert_allclose(M.topk_noise_batched(emb, idx, noise, k=3), expected, atol=1e-12)


def test_topk_negatives_averages_every_batch_on_both_sides():
    from csebench.analysis import topk_negatives

    five = batch_with_cosines(5).float()
    corpus = [f"s{i}" for i in range(5)]
    encode = lambda sents: five[torch.as_tensor([int(s[1:]) for s in sents])]  # noqa: E731
    res = topk_negatives(encode, corpus, batch_sizes=(4, 5, 8), k=4, repeats=3, pool_size=5)
    assert list(res["batch_sizes"]) == ["5"]  # 4: no 4 other sentences; 8: more than the pool
    got = res["batch_sizes"]["5"]
    np.testing.assert_allclose(got["topk_mean"], [0.70, 0.38, 0.20, 0.16], atol=1e-6)  # every batch is the pool
    np.testing.assert_allclose(got["topk_std"], 0.0, atol=1e-6)
    # the Gaussian side: 15 fresh standard normal vectors per batch (M = 3N), so it varies from batch to batch
    assert len(got["gaussian_topk_mean"]) == 4 and min(got["gaussian_topk_std"]) > 0
    assert got["gaussian_topk_mean"] == sorted(got["gaussian_topk_mean"], reverse=True)
    assert all(-1 < v < 1 for v in got["gaussian_topk_mean"])
    assert res["gaussian_ratio"] == 3 and res["repeats"] == 3


# ------------------------------------------------------------------ DistillCSE

def test_kl_identical_is_zero_and_gaussian_closed_form():
    s = np.random.default_rng(0).normal(size=1000)
    assert M.histogram_kl(s, s) == pytest.approx(0.0, abs=1e-9)
    assert M.gaussian_kl(0.3, 0.1, 0.3, 0.1) == pytest.approx(0.0)
    assert M.gaussian_kl(0.0, 1.0, 1.0, 1.0) == pytest.approx(0.5)  # (mu1 - mu2)^2 / 2
    assert M.gaussian_kl(0.0, 1.0, 0.0, 2.0) == pytest.approx(math.log(2) + 1 / 8 - 0.5)
    far = M.histogram_kl(s, s + 10)
    assert far > 10


def test_sharpness_on_known_distributions():
    assert M.sharpness(np.full((3, 63), 0.4)) == pytest.approx(0.0, abs=1e-12)  # uniform target
    one_hot = np.zeros((1, 10))
    one_hot[0, 0] = 1.0
    assert M.sharpness(one_hot, temperature=1e-3) == pytest.approx(1.0, abs=1e-6)
    # two logits equal, rest -inf-like: entropy log 2 over n = 4 -> 1 - log2/log4 = 0.5
    two = np.array([[1.0, 1.0, -1e3, -1e3]])
    assert M.sharpness(two, temperature=1.0) == pytest.approx(0.5)


def test_sorted_curve_and_in_batch_logits():
    np.testing.assert_allclose(M.sorted_curve([3, 1, 2], points=3), [3, 2, 1])
    e = torch.eye(3)
    e[2] = e[0]
    lg = M.in_batch_logits(e)
    assert lg.shape == (3, 2)
    np.testing.assert_allclose(lg, [[0, 1], [0, 0], [1, 0]])


def test_teacher_variance_entropy_and_spearman():
    assert M.teacher_variance(np.ones((4, 10))) == 0.0
    v = np.stack([np.zeros(5), np.full(5, 2.0)])  # two teachers, std 1 on every item
    assert M.teacher_variance(v) == pytest.approx(1.0)
    # DistillCSE Table 2: Gaussian entropy of its std 0.0406 is -1.7853, of 2.177e-5 is -9.3160
    assert M.gaussian_entropy(0.0406) == pytest.approx(-1.7853, abs=1e-3)
    assert M.gaussian_entropy(2.177e-5) == pytest.approx(-9.3160, abs=1e-3)
    rows = np.random.default_rng(1).normal(size=(3, 12))
    assert M.topk_spearman_across_teachers(np.stack([rows, rows * 2 + 1]), k=12) == pytest.approx(1.0)
    assert M.topk_spearman_across_teachers(np.stack([rows, -rows]), k=12) == pytest.approx(-1.0)


# ------------------------------------------------------------------ retrieval, groups

def test_knn_and_score_groups():
    buf = torch.eye(4)
    q = torch.tensor([[0.0, 1.0, 0.1, 0.0], [1.0, 0.0, 0.0, 0.5]])
    ind, sim = M.knn(buf, q, 2)
    np.testing.assert_array_equal(ind, [[1, 2], [0, 3]])
    assert sim[0, 0] > sim[0, 1]
    np.testing.assert_array_equal(M.score_groups([0.0, 0.99, 1.0, 3.5, 4.0, 5.0]), [0, 0, 1, 3, 4, 4])


def test_projection_dims():
    from csebench.analysis.core import projection_matrix

    emb = torch.randn(300, 32, dtype=torch.float64)
    for method in ("random", "pca"):
        for dim in (8, 16):
            W = projection_matrix(method, dim, emb)
            assert W.shape == (32, dim) and (emb.double() @ W).shape == (300, dim)
    W = projection_matrix("pca", 8, emb)
    np.testing.assert_allclose((W.T @ W).numpy(), np.eye(8), atol=1e-9)  # orthonormal principal directions
    # PCA keeps the variance of the top directions: data living in 2 dims is reproduced exactly
    low = torch.randn(100, 2, dtype=torch.float64) @ torch.randn(2, 32, dtype=torch.float64)
    P = projection_matrix("pca", 2, low)
    c = low.double() - low.double().mean(0)
    np.testing.assert_allclose((c @ P @ P.T).numpy(), c.numpy(), atol=1e-8)


# ------------------------------------------------------------------ model-level and figures

def test_layer_similarities_on_tiny_encoder(tiny_encoder):
    from csebench.analysis import layer_similarities

    enc = tiny_encoder("avg")
    res = layer_similarities(enc, ["a man plays a guitar .", "the cat sleeps", "a"], batch_size=2)
    assert list(res["inter_layer"]) == ["1-2"] and list(res["toksim"]) == ["1", "2"]
    assert -1 <= res["inter_layer"]["1-2"] <= 1
    # layer 2 pooled the same way as SentenceEncoder.encode
    emb = enc.encode(["the cat sleeps"])
    assert emb.shape[1] == enc.hidden_size


def test_neighbours_and_topk_with_a_fake_encoder():
    from csebench.analysis import neighbours_markdown, retrieve_neighbours, topk_negatives

    vocab = {}

    def encode(sents):  # bag of words: sentences sharing words are near
        for s in sents:
            for w in s.split():
                vocab.setdefault(w, len(vocab) % 64)
        out = torch.zeros(len(sents), 64)
        for i, s in enumerate(sents):
            for w in s.split():
                out[i, vocab[w]] += 1
        return out + 1e-3

    corpus = [f"w{i} w{i + 1}" for i in range(100)]
    res = retrieve_neighbours(encode, corpus, queries=["w5 w6"], buffer_size=100, k=3)
    assert res["items"][0]["neighbours"][0]["sentence"] == "w5 w6"
    md = neighbours_markdown(res, "tiny")
    assert "| **Query** | | w5 w6 | |" in md and md.count("| Retrieved |") == 3
    tk = topk_negatives(encode, corpus, batch_sizes=(8, 32), k=4, repeats=5, pool_size=100)
    a, b = tk["batch_sizes"]["8"]["mean_of_topk"], tk["batch_sizes"]["32"]["mean_of_topk"]
    assert b >= a  # larger batches hold more similar negatives


def test_figures_are_written(tmp_path):
    from csebench.results import analysis_plots

    analysis_plots.plot_align_uniform([{"label": "a", "alignment": 0.2, "uniformity": -2.0, "sts_avg": 70.0},
                              {"label": "b", "alignment": 0.3, "uniformity": -2.5, "sts_avg": None}], tmp_path / "au.png")
    rng = np.random.default_rng(0)
    groups = {g: {"cosines": list(rng.uniform(0, 1, 20))} for g in ["0-1", "1-2", "2-3", "3-4", "4-5"]}
    analysis_plots.plot_cosine_dist({"m1": {"groups": groups}, "m2": {"groups": groups}}, tmp_path / "cd.png")
    analysis_plots.plot_layers({"m": {"inter_layer": {"1-2": 0.9, "2-3": 0.95}, "toksim": {"1": 0.3, "2": 0.5, "3": 0.6}}}, tmp_path / "ly.png")
    for name in ("au", "cd", "ly"):
        data = (tmp_path / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temporary files left


def test_align_uniform_and_cosine_dist_on_a_small_stsb(tmp_path):
    from csebench.analysis import align_uniform, cosine_distribution

    d = tmp_path / "STS" / "STSBenchmark"
    d.mkdir(parents=True)
    rows = [("a b", "a b", 5.0), ("c d", "c  d", 4.5), ("a b", "e f", 0.5), ("c d", "e f", 4.0)]
    d.joinpath("sts-test.csv").write_text("".join(f"g\tx\t2012\t0\t{s}\t{a}\t{b}\n" for a, b, s in rows))
    basis = {"a b": [1.0, 0, 0], "c d": [0, 1.0, 0], "e f": [0, 0, 1.0]}
    encode = lambda sents: torch.tensor([basis[s] for s in sents])  # noqa: E731
    res = align_uniform(encode, tmp_path)
    assert res["n_positive_pairs"] == 2  # score > 4 only: 4.0 is excluded
    assert res["alignment"] == pytest.approx(0.0)  # positives are identical sentences
    assert res["uniformity"] == pytest.approx(-4.0)  # 3 orthonormal sentences
    cd = cosine_distribution(encode, tmp_path)
    assert cd["groups"]["0-1"]["cosines"] == [0.0] and cd["groups"]["4-5"]["n"] == 3
    assert cd["groups"]["4-5"]["mean"] == pytest.approx(2 / 3)


def test_teacher_logit_stats_identical_teachers_have_zero_variance():
    from csebench.analysis import teacher_logit_stats
    from csebench.evaluation.sts import PairSet

    rng = np.random.default_rng(0)
    table = {}

    def encode(sents):
        return torch.tensor(np.stack([table.setdefault(s, rng.normal(size=16)) for s in sents]))

    corpus = [f"s{i}" for i in range(40)]
    dev = PairSet([f"d{i}" for i in range(30)], [f"e{i}" for i in range(30)], np.linspace(0, 5, 30), ["dev"] * 30)
    res = teacher_logit_stats([encode, encode], corpus, dev, batch_size=8, n_batches=3, points=10)
    t = res["teachers"][0]
    assert len(t["logits"]["train_sorted"]) == 10 and t["logits"]["train_sorted"][0] >= t["logits"]["train_sorted"][-1]
    assert 0.0 <= t["logits"]["train_sharpness"] <= 1.0
    assert res["across_teachers"]["logits_std"] == 0.0 and res["across_teachers"]["first_order_std"] == 0.0
    assert res["across_teachers"]["top12_spearman"] == pytest.approx(1.0)
    single = teacher_logit_stats([encode], corpus, dev, batch_size=8, n_batches=2)
    assert "across_teachers" not in single


def test_scatter_labels_of_coinciding_points_do_not_overlap():
    from csebench.results.analysis_plots import label_slots

    xs = np.array([0.130, 0.1301, 0.131, 0.09])
    ys = np.array([-2.30, -2.301, -2.36, -1.70])
    slots = label_slots(xs, ys, (0.08, 0.14), (-2.45, -1.6))
    frac = {i: (y + 2.45) / 0.85 for i, y in slots.items()}
    near = [0, 1, 2]  # three runs at almost the same place
    gaps = [abs(frac[a] - frac[b]) for a in near for b in near if a < b]
    assert min(gaps) >= 0.055 - 1e-9
    assert slots[3] == pytest.approx(-1.70)  # an isolated point keeps its label beside it


# ------------------------------------------------------------------ IS-CSE Table 9

def test_neighbours_retrieve_on_the_runs_training_head(tmp_path, tiny_encoder):
    """IS-CSE's kNN retrieves on normalised MLP-head outputs: the analysis attaches the run's saved head, and on a
    head that is not the identity its neighbours differ from the raw-[CLS] ones (representation: eval)."""
    import json

    from csebench.analysis.core import training_representation
    from csebench.cli import main
    from csebench.model.encoder import load_encoder

    enc = tiny_encoder()
    with torch.no_grad():
        enc.head.dense.weight.copy_(torch.randn(enc.head.dense.weight.shape, generator=torch.Generator().manual_seed(1)))
    enc.save(tmp_path / "model")
    model = tmp_path / "model"
    words = "the a cat dog man woman plays sings runs guitar piano park river city red blue old young".split()
    rng = np.random.default_rng(0)
    sentences = sorted({" ".join(rng.choice(words, size=rng.integers(3, 9))) for _ in range(80)})
    (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n")

    # what it retrieves on: tanh(W [CLS] + b) of the saved head, dropout off, one sentence at a time here
    loaded = load_encoder(model)
    encode, what = training_representation(loaded, str(model), batch_size=7)
    assert what == {"representation": "training", "head": True, "max_seq_length": 32, "dropout": "off (eval mode)"}
    direct = load_encoder(model).eval()
    head = torch.nn.Linear(enc.hidden_size, enc.hidden_size)
    head.load_state_dict(enc.head.dense.state_dict())
    with torch.no_grad():
        rows = []
        for s in sentences[:10]:
            ids = torch.as_tensor([direct.tokenizer(s, truncation=True, max_length=32)["input_ids"]])
            cls = direct.backbone(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[:, 0]
            rows.append(torch.tanh(head(cls))[0])
    torch.testing.assert_close(encode(sentences[:10]), torch.stack(rows), atol=1e-5, rtol=1e-4)

    results = {}
    for rep in ("training", "eval"):
        out = tmp_path / f"{rep}.json"
        assert main(["analyze", "neighbours", "--model", str(model), "--corpus", str(tmp_path / "corpus.txt"),
                     "--buffer-size", "60", "--n-queries", "6", "--representation", rep, "--out", str(out),
                     "--markdown", str(tmp_path / f"{rep}.md")]) == 0
        results[rep] = json.loads(out.read_text())
    retrieved = {rep: [[nb["sentence"] for nb in it["neighbours"]] for it in r["items"]] for rep, r in results.items()}
    assert [it["query"] for it in results["training"]["items"]] == [it["query"] for it in results["eval"]["items"]]
    assert retrieved["training"] != retrieved["eval"]
    assert results["training"]["head"] is True and results["eval"]["representation"] == "eval"
    assert "training head" in (tmp_path / "training.md").read_text()
    assert "the evaluation embedding" in (tmp_path / "eval.md").read_text()


def test_neighbours_of_a_run_without_a_head_retrieve_on_its_pooled_output(tmp_path, tiny_encoder):
    from csebench.analysis.core import training_representation
    from csebench.model.encoder import load_encoder

    tiny_encoder("avg").save(tmp_path / "model")
    encode, what = training_representation(load_encoder(tmp_path / "model"), str(tmp_path / "model"))
    assert what["head"] is False  # an avg run trains on its pooled output: that is what is retrieved on
    sents = ["a man plays a guitar", "the cat sleeps", "a dog runs in the park"]
    torch.testing.assert_close(encode(sents), load_encoder(tmp_path / "model").encode(sents), atol=1e-5, rtol=1e-4)
