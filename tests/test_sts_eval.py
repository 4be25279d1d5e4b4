import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from csebench.core.errors import DataError
from csebench.evaluation.sts import STS_SUBSETS, evaluate_sts, load_task
from runhelpers import SHARED, assert_fails


def _write_fixture(root):
    """A hand-made SentEval tree: one pair per subset with known similarity order."""
    for task, subsets in STS_SUBSETS.items():
        d = root / "STS" / f"{task}-en-test"
        d.mkdir(parents=True)
        for k, sub in enumerate(subsets):
            lines, gs = [], []
            for j in range(4):
                lines.append(f"w{j} tok  a\tw{j}   tok b{task}{k}")
                gs.append(str(j) if j != 3 else "")  # an empty gold score: SentEval skips the pair
            (d / f"STS.input.{sub}.txt").write_text("\n".join(lines) + "\n")
            (d / f"STS.gs.{sub}.txt").write_text("\n".join(gs) + "\n")
    sb = root / "STS" / "STSBenchmark"
    sb.mkdir(parents=True)
    for split in ("dev", "test"):
        rows = [f"g\tsrc\tyr\t{i:04d}\t{s}\tsent {i} one\tsent {i} two" for i, s in enumerate([1.0, 4.5, 2.0, 3.5])]
        (sb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    sick = root / "SICK"
    sick.mkdir()
    rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    rows += [f"{i}\tsick {i} a\tsick {i} b\t{s}\tNEUTRAL" for i, s in enumerate([3.0, 1.0, 4.0])]
    (sick / "SICK_test_annotated.txt").write_text("\n".join(rows) + "\n")
    return root


def test_loaders_parse_like_senteval(tmp_path):
    root = _write_fixture(tmp_path)
    sts12 = load_task(root, "STS12")
    assert len(sts12.scores) == 3 * len(STS_SUBSETS["STS12"])  # empty gold scores skipped
    assert sts12.sent1[0] == "w0 tok a" and sts12.sent2[0] == "w0 tok bSTS120"  # whitespace re-joined
    stsb = load_task(root, "STSBenchmark")
    assert stsb.scores.tolist() == [1.0, 4.5, 2.0, 3.5] and stsb.sent1[1] == "sent 1 one"
    sick = load_task(root, "SICKRelatedness")
    assert sick.scores.tolist() == [3.0, 1.0, 4.0]


def test_known_spearman_with_controlled_encoder(tmp_path):
    """An encoder whose pair cosines follow a known order gives the Spearman of that order."""
    root = _write_fixture(tmp_path)
    stsb = load_task(root, "STSBenchmark")
    # cosine of pair i is cos(angle_i); make it increase with the chosen system score
    system = {0: 0.1, 1: 0.9, 2: 0.5, 3: 0.3}  # ranks vs gold [1, 4.5, 2, 3.5]

    def encode(sentences):
        out = []
        for s in sentences:
            parts = s.split()
            if parts[0] == "sent":
                i = int(parts[1])
                angle = np.arccos(system[i])
                out.append([1.0, 0.0] if parts[2] == "one" else [np.cos(angle), np.sin(angle)])
            else:
                out.append([1.0, 0.0])
        return torch.tensor(out)

    res = evaluate_sts(encode, root, tasks=["STSBenchmark"])
    expected = spearmanr([system[i] for i in range(4)], stsb.scores)[0] * 100
    assert res["tasks"]["STSBenchmark"] == pytest.approx(expected)
    assert res["tasks"]["STSBenchmark"] == pytest.approx(80.0)  # ranks (1,4,3,2) vs (1,4,2,3): 1 - 6*2/(4*15) = 0.8


def test_each_distinct_sentence_encoded_once(tmp_path):
    root = _write_fixture(tmp_path)
    calls = []

    def encode(sentences):
        calls.append(list(sentences))
        return torch.randn(len(sentences), 4)

    res = evaluate_sts(encode, root)
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0]))
    assert set(res["tasks"]) == {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"}
    assert "avg" in res and set(res["subsets"]["STS12"]) == set(STS_SUBSETS["STS12"])


def test_malformed_files_are_clear_errors(tmp_path):
    root = _write_fixture(tmp_path)
    p = root / "STS" / "STSBenchmark" / "sts-test.csv"
    p.write_text("g\tsrc\tyr\t0\tnot-a-number\ta\tb\n")
    with pytest.raises(DataError, match="sts-test.csv:1.*not a number"):
        load_task(root, "STSBenchmark")
    p.write_text("only\tthree\tcolumns\n")
    with pytest.raises(DataError, match="sts-test.csv:1.*columns"):
        load_task(root, "STSBenchmark")
    (root / "SICK" / "SICK_test_annotated.txt").unlink()
    with pytest.raises(DataError, match="missing evaluation file.*SICK_test_annotated"):
        load_task(root, "SICKRelatedness")


def test_real_data_pair_counts(shared_dir):
    """Pair counts after SentEval's skipping of unscored pairs (STS12-16) on the shared data."""
    root = shared_dir / "senteval" / "downstream"
    counts = {t: len(load_task(root, t).scores) for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]}
    assert counts == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186,
                      "STSBenchmark": 1379, "SICKRelatedness": 4927}


def test_pair_cap_keeps_a_seeded_stratified_subset_in_order():
    from csebench.core.errors import ConfigError
    from csebench.evaluation.sts import PairSet, cap_pairs

    n = 1000
    groups = ["big"] * 900 + ["small"] * 60 + ["tiny"] * 40
    ps = PairSet([f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], np.arange(n, dtype=float), groups)
    sub = cap_pairs(ps, 100, seed=7)
    idx = [int(s[1:]) for s in sub.sent1]
    assert idx == sorted(idx) and len(set(idx)) == len(idx)  # SentEval's order, no repeats
    assert [int(s[1:]) for s in sub.sent2] == idx and list(sub.scores) == idx  # pairs stay aligned
    counts = {g: sub.groups.count(g) for g in ("big", "small", "tiny")}
    assert counts == {"big": 90, "small": 10, "tiny": 10}  # proportional, each subset keeps its minimum of 10
    assert cap_pairs(ps, 100, seed=7).sent1 == sub.sent1  # deterministic
    assert cap_pairs(ps, 100, seed=8).sent1 != sub.sent1
    assert cap_pairs(ps, None) is ps and cap_pairs(ps, n) is ps
    with pytest.raises(ConfigError, match="at least 2"):
        cap_pairs(ps, 1)


def test_capped_evaluation_is_marked_and_scores_only_the_subset(shared_dir):
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import TEST_TASKS, load_test_tasks

    root = senteval_root(shared_dir / "senteval")
    seen = []

    def encode(sentences):
        seen.extend(sentences)
        return torch.tensor([[1.0, len(s) % 7, s.count("e") % 5] for s in sentences], dtype=torch.float32)

    full = evaluate_sts(encode, root)
    assert full["protocol"] == "full" and "warning" not in full
    seen.clear()
    capped = evaluate_sts(encode, root, max_pairs=200, seed=3)
    assert capped["protocol"] == "capped" and capped["max_sts_pairs"] == 200 and "not comparable" in capped["warning"]
    for task in TEST_TASKS:  # about 200 pairs each (a small subset's minimum of 10 may add a few)
        assert 150 <= capped["n_pairs"][task] <= 230 < full["n_pairs"][task]
    wanted = {s for ps in load_test_tasks(root, max_pairs=200, seed=3).values() for s in (*ps.sent1, *ps.sent2)}
    assert set(seen) == wanted  # exactly the subsets' sentences were encoded


def test_embed_dim_analysis_scores_the_capped_subsets_the_embeddings_table_holds(shared_dir):
    """The demo caps STS pairs: SSCL Table 5's projection analysis must read the same subsets, not
    encode the 17k sentences the run's embeddings table left out."""
    from csebench.analysis.core import projected_sts
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.embeddings import evaluation_sentences

    root = senteval_root(shared_dir / "senteval")
    seen = []

    def encode(sentences):
        seen.extend(sentences)
        return torch.tensor([[1.0, len(s) % 7, s.count("e") % 5, s.count("a") % 3] for s in sentences], dtype=torch.float32)

    res = projected_sts(encode, root, dims=[2], methods=["random"], max_pairs=200)
    assert res["protocol"] == "capped" and res["max_sts_pairs"] == 200
    assert set(seen) <= set(evaluation_sentences(root, transfer=False, max_sts_pairs=200))
    direct = evaluate_sts(encode, root, max_pairs=200)
    assert res["full"]["avg"] == pytest.approx(direct["avg"])
    seen.clear()
    assert projected_sts(encode, root, dims=[2], methods=["random"])["protocol"] == "full"
    assert len(set(seen)) > 20000  # uncapped: every pair of the 7 tasks


# -------------------------------------------------------------------------------------- gold scores that are not finite


@pytest.mark.parametrize("value", ["inf", "nan", "-Infinity"])
def test_non_finite_gold_score_names_file_and_line(tmp_path, capsys, tiny_encoder, value):
    """Every third MSRpar score set to inf gave MSRpar 30.37 instead of 79.30 (nan: `STS avg nan` and a
    bare NaN in sts.json), exit 0. float() takes them; the loader must not."""
    import shutil

    se = tmp_path / "senteval"
    for folder in ("STS", "SICK"):
        shutil.copytree(SHARED / "senteval" / "downstream" / folder, se / folder)
    gold = se / "STS" / "STS12-en-test" / "STS.gs.MSRpar.txt"
    lines = gold.read_text(encoding="utf-8").splitlines(keepends=True)
    gold.write_text("".join(f"{value}\n" if i % 3 == 2 else line for i, line in enumerate(lines)), encoding="utf-8")
    tiny_encoder("avg").save(tmp_path / "model")
    out = tmp_path / "out" / "sts.json"
    assert_fails(capsys, ["eval-sts", "--model", str(tmp_path / "model"), "--senteval", str(se), "--out", str(out),
                          "--no-progress"], f"{gold}:3: score '{value}' is not a finite number", outputs=[out.parent])


# -------------------------------------------------------------------------------------- vectors that score nothing


def test_an_all_zero_embedding_is_refused_naming_the_task_and_pair(tmp_path):
    """An encode function that returns one all-zero (finite) row gave STS14 NaN and an average of NaN, with no
    warning: a zero vector has no direction, its cosine is 0/0."""
    root = _write_fixture(tmp_path)
    zero = load_task(root, "STS14").sent2[4]

    def encode(sentences):
        out = torch.randn(len(sentences), 4, generator=torch.Generator().manual_seed(0))
        out[[i for i, s in enumerate(sentences) if s == zero]] = 0.0
        return out

    with pytest.raises(DataError) as err:
        evaluate_sts(encode, root)
    assert str(err.value) == (f"the encode function returned an all-zero vector (norm 0) for STS14 pair 4 (sentence2 "
                              f"{zero!r}; 1 of the {len(_all_sentences(root))} sentences encoded have one): its cosine "
                              "similarity is undefined (0/0), which would make STS14 and the STS average NaN; an "
                              "embedding must have a direction (check the model's pooling and weights, or what the "
                              "encode function returns for that sentence)")


def _all_sentences(root) -> set[str]:
    from csebench.evaluation.sts import load_test_tasks

    return {s for ps in load_test_tasks(root).values() for s in (*ps.sent1, *ps.sent2)}


def test_vectors_on_the_meta_device_are_one_line(tmp_path, tiny_encoder):
    """A tensor on the meta device (a shape, no values) ended in NotImplementedError ("Cannot copy out of meta
    tensor"), returned by an encode function or made by an encoder built on it."""
    import csebench
    from csebench.core.errors import ConfigError

    root = _write_fixture(tmp_path)
    with pytest.raises(DataError, match=r"^the encode function returned a torch.Tensor of shape \(\d+, 4\) and dtype "
                                        r"float32 on the meta device for \d+ sentences: a meta tensor has a shape and no "
                                        r"values .* load the weights"):
        evaluate_sts(lambda s: torch.empty(len(s), 4, device="meta"), root)
    encoder = tiny_encoder("avg").to("meta")
    with pytest.raises(ConfigError, match=r"^the encoder's weights are on the meta device: shapes without values"):
        csebench.evaluate_sts(encoder, senteval=root)
