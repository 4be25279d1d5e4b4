"""Teacher caches: cached logits equal running the teacher models; M-teacher averaging (Eq. 7);
metadata checks (corpus, tokenizer, max length, runs) with clear errors; the CLI command."""

import functools
import json
import shutil

import numpy as np
import pytest
import torch

from csebench.cli import main
from csebench.model.encoder import load_encoder
from csebench.core.errors import ConfigError, DataError
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.model.teacher_cache import TeacherBank, meta_path
from csebench.training.teachers import build_teacher_cache
from runhelpers import assert_fails, has_term, run_cli, train_argv, write_config

SENTENCES = [f"sentence number {i} about {w} and some other words" for i, w in
             enumerate(["cats", "dogs", "the sea", "music", "a long road trip through the mountains in winter",
                        "tea", "coffee", "rain", "snow", "trains", "planes", "books"])]
MAX_LEN = 12  # shorter than some sentences: truncation must match training


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizer):
    """Two saved tiny teachers (different seeds) and their caches of a small corpus, built once."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import SentenceEncoder, build_backbone

    root = tmp_path_factory.mktemp("teachers")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    out = []
    for seed in (0, 1):
        model = root / f"teacher{seed}" / "model"
        cfg = BackboneConfig(model="random", pooler="avg")  # avg: random tiny BERTs' CLS vectors are all alike
        SentenceEncoder(build_backbone(cfg, tokenizer, seed=seed), tokenizer, "avg").save(model)
        cache = root / "caches" / f"t{seed}" / "embeddings.npy"
        build_teacher_cache(model, corpus, cache, max_seq_length=MAX_LEN, batch_size=5)
        out.append((model, cache))
    return root, corpus, out


@pytest.fixture()
def teachers(built, tmp_path):
    """A private copy of the caches (tests may edit their metadata)."""
    root, corpus, ts = built
    out = []
    for model, cache in ts:
        dst = tmp_path / cache.parent.name
        shutil.copytree(cache.parent, dst)
        out.append((model, dst / cache.name))
    return corpus, out


@functools.lru_cache(maxsize=None)
def running_cosines(model_dir):
    """Cosines of every corpus pair from running the saved teacher (eval mode, eval pooler, same truncation)."""
    enc = load_encoder(model_dir)
    emb = enc.encode(SENTENCES, batch_size=4, max_length=MAX_LEN)
    emb = torch.nn.functional.normalize(emb, dim=-1)
    return emb @ emb.T


def test_cached_logits_equal_running_the_teacher(teachers, tokenizer):
    corpus, ts = teachers
    rows, cols = torch.tensor([3, 0, 7, 4]), torch.tensor([4, 11, 2, 3, 9])
    for model, cache in ts:
        bank = TeacherBank([cache], corpus_size=len(SENTENCES), corpus_path=corpus, tokenizer=tokenizer, max_seq_length=MAX_LEN)
        direct = running_cosines(model)
        assert torch.allclose(bank.logits(rows, cols), direct[rows][:, cols], atol=1e-5)
        meta = json.loads(meta_path(cache).read_text())
        assert meta["pooler"] == "avg" and meta["rows"] == len(SENTENCES) and meta["dim"] == 32
    a, b = (running_cosines(m) for m, _ in ts)
    assert not torch.allclose(a, b)  # two different teachers


def test_m_teacher_logits_are_the_mean_of_per_teacher_logits(teachers, tokenizer):
    corpus, ts = teachers
    caches = [c for _, c in ts]
    bank = TeacherBank(caches, corpus_size=len(SENTENCES), corpus_path=corpus, tokenizer=tokenizer)
    singles = [TeacherBank([c]) for c in caches]
    idx = torch.arange(len(SENTENCES))
    mean = sum(s.logits(idx, idx) for s in singles) / len(singles)
    assert bank.num_teachers == 2 and bank.dim == 64
    assert torch.allclose(bank.logits(idx, idx), mean, atol=1e-6)
    # 16 components (repeats are fine for the algebra): one (n x 16D) product equals the mean of 16
    many = TeacherBank(caches * 8)
    assert torch.allclose(many.logits(idx, idx), mean, atol=1e-6)
    # the memory-mapped path (bank too large for RAM) gives the same logits
    mapped = TeacherBank(caches, in_memory_limit=0)
    assert mapped.matrix is None
    assert torch.allclose(mapped.logits(idx[:5], idx), bank.logits(idx[:5], idx), atol=1e-6)


def test_student_uses_cached_teacher_of_its_batch(teachers, tokenizer):
    corpus, ts = teachers
    obj = Objective({"distillation": {"teachers": {"run": "simcse", "seeds": [0, 1]}, "shuffle": "none"}}, 32, 2,
                    teacher_cache=[str(c) for _, c in ts], corpus_size=len(SENTENCES), corpus_path=str(corpus),
                    tokenizer=tokenizer)
    term = obj.terms["distillation"]
    idx = torch.tensor([5, 1, 9, 2])
    direct = sum(running_cosines(m) for m, _ in ts) / 2
    assert torch.allclose(term.teacher_logits(idx, idx), direct[idx][:, idx], atol=1e-5)
    ctx = StepContext(z1=torch.randn(4, 32, requires_grad=True), z2=torch.randn(4, 32), temperature=0.05, step=0,
                      total_steps=1, indices=idx, all_indices=idx)
    loss, logs = obj(ctx)
    assert torch.isfinite(loss) and "loss_distillation" in logs


def test_missing_cache_or_metadata(tmp_path, teachers):
    with pytest.raises(DataError, match="teacher cache not found: .*nope.npy.*csebench teacher-cache"):
        TeacherBank([tmp_path / "nope.npy"])
    _, ts = teachers
    cache = ts[0][1]
    meta_path(cache).unlink()
    with pytest.raises(DataError, match="has no metadata"):
        TeacherBank([cache])


def test_corpus_mismatch(tmp_path, teachers, tokenizer):
    corpus, ts = teachers
    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed(SENTENCES)) + "\n")  # same size, other content
    with pytest.raises(DataError, match="was computed on corpus .* not on the student's corpus"):
        TeacherBank([ts[0][1]], corpus_path=other, tokenizer=tokenizer)
    with pytest.raises(DataError, match="has 12 rows but the student's corpus has 13"):
        TeacherBank([ts[0][1]], corpus_size=13)


def test_tokenizer_and_max_length_mismatch(teachers, tokenizer):
    corpus, ts = teachers
    cache = ts[0][1]
    meta = json.loads(meta_path(cache).read_text())
    meta["tokenizer"] = "0123456789abcdef"  # a teacher with another tokenizer
    meta_path(cache).write_text(json.dumps(meta))
    with pytest.raises(DataError, match="different tokenizer than the student"):
        TeacherBank([cache], corpus_path=corpus, tokenizer=tokenizer)
    with pytest.raises(DataError, match="max length 12, the student trains with 32"):
        TeacherBank([ts[1][1]], max_seq_length=32)


def test_teacher_count_and_identity_checked_against_settings(tmp_path, teachers):
    _, ts = teachers
    caches = [c for _, c in ts]
    with pytest.raises(ConfigError, match="names 1 teacher.*but 2 teacher cache"):
        TeacherBank(caches, expected_runs=[("demo", "simcse", 1)])
    cache = caches[0]
    meta = json.loads(meta_path(cache).read_text())
    meta["teacher_run"] = {"suite": "demo", "name": "simcse", "seed": 43}
    meta_path(cache).write_text(json.dumps(meta))
    with pytest.raises(DataError, match="belongs to run demo/simcse/seed43, expected teacher 1 to be demo/simcse/seed42"):
        TeacherBank([cache], expected_runs=[("demo", "simcse", 42)])
    TeacherBank([cache], expected_runs=[("demo", "simcse", 43)])


def test_cli_teacher_cache(tmp_path, teachers, capsys):
    corpus, ts = teachers
    model = ts[0][0]
    out = tmp_path / "cli" / "embeddings.npy"
    assert main(["teacher-cache", "--model", str(model), "--corpus", str(corpus), "--out", str(out),
                 "--max-seq-length", str(MAX_LEN)]) == 0
    assert np.allclose(np.load(out), np.load(ts[0][1]), atol=1e-6)  # other batch size: other padding
    assert main(["teacher-cache", "--model", str(tmp_path / "missing"), "--corpus", str(corpus), "--out", str(out)]) == 2
    assert "teacher model folder not found" in capsys.readouterr().err
    # the teacher's training max length is the default when the model carries its training config
    model2 = tmp_path / "m2"
    shutil.copytree(model, model2)
    (model2 / "training_config.json").write_text(json.dumps({"suite": "s", "name": "simcse", "seed": 3,
                                                             "training": {"max_seq_length": 7}}))
    out2 = tmp_path / "cli2" / "embeddings.npy"
    assert main(["teacher-cache", "--model", str(model2), "--corpus", str(corpus), "--out", str(out2)]) == 0
    meta = json.loads(meta_path(out2).read_text())
    assert meta["max_seq_length"] == 7 and meta["teacher_run"]["name"] == "simcse"


def test_training_representation_cache_is_the_saved_heads_output(tmp_path, teachers, tiny_encoder):
    """DCLR's complementary model as released (teacher_representation: training): the pooler's output through the
    run's saved training head, as a converted SimCSE checkpoint's pooler_output; the bank refuses a cache of the other
    representation in one line, and a cache written before the key existed counts as eval."""
    from csebench.objectives.distillation import open_teacher_bank

    corpus, ts = teachers
    enc = tiny_encoder("cls", seed=3)
    with torch.no_grad():  # a head far from the identity
        enc.head.dense.weight.copy_(torch.randn(enc.head.dense.weight.shape, generator=torch.Generator().manual_seed(5)))
    enc.save(tmp_path / "model")
    caches = {}
    for rep in ("eval", "training"):
        caches[rep] = tmp_path / rep / "c.npy"
        assert main(["teacher-cache", "--model", str(tmp_path / "model"), "--corpus", str(corpus), "--out",
                     str(caches[rep]), "--max-seq-length", str(MAX_LEN), "--representation", rep]) == 0
        meta = json.loads(meta_path(caches[rep]).read_text())
        assert meta["representation"] == rep and meta["training_head"] == (rep == "training")
    direct = load_encoder(tmp_path / "model").eval()
    with torch.no_grad():
        cls = torch.stack([direct.backbone(input_ids=torch.as_tensor([ids])).last_hidden_state[0, 0] for ids in
                           direct.tokenizer(SENTENCES, truncation=True, max_length=MAX_LEN)["input_ids"]])
        head = torch.nn.functional.normalize(torch.tanh(cls @ enc.head.dense.weight.T + enc.head.dense.bias), dim=-1)
    np.testing.assert_allclose(np.load(caches["training"]), head.numpy(), atol=2e-5)
    np.testing.assert_allclose(np.load(caches["eval"]), torch.nn.functional.normalize(cls, dim=-1).numpy(), atol=2e-5)
    assert not np.allclose(np.load(caches["training"]), np.load(caches["eval"]), atol=1e-2)
    for have, want in (("eval", "training"), ("training", "eval")):
        with pytest.raises(DataError, match=f"holds the teacher's {have} representation, the student reads its {want}") as e:
            open_teacher_bank("debiased_negatives", {"run": "simcse"}, 0, teacher_cache=[str(caches[have])],
                              representation=want)
        assert "\n" not in str(e.value)
        TeacherBank([caches[want]], representation=want)
    from csebench.objectives.debiased import DebiasedNegatives, DebiasedSettings  # the term reads what it is set to

    released = DebiasedSettings(teachers={"run": "simcse"}, teacher_representation="training")
    assert DebiasedNegatives(released, 32, 2, teacher_cache=[str(caches["training"])]).bank.rows == len(SENTENCES)
    with pytest.raises(DataError, match="--representation training"):
        DebiasedNegatives(released, 32, 2, teacher_cache=[str(caches["eval"])])
    TeacherBank([ts[0][1]], representation="eval")
    meta = json.loads(meta_path(ts[0][1]).read_text())
    meta.pop("representation")
    meta_path(ts[0][1]).write_text(json.dumps(meta))
    TeacherBank([ts[0][1]], representation="eval")
    with pytest.raises(DataError, match="holds the teacher's eval representation"):
        TeacherBank([ts[0][1]], representation="training")


# ------------------------------------------------ teachers that do not exist or do not fit the student, through the CLI


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_cache_that_does_not_exist(inputs, capsys):
    cfg = write_config(inputs / "over.yaml", {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}}}}}})
    out = inputs / "run"
    missing = inputs / "teachers" / "simcse" / "seed2" / "embeddings.npy"
    assert_fails(capsys, train_argv(inputs, out, cfg) + ["--teacher-cache", str(missing)],
                 "teacher cache not found", str(missing), outputs=[out])


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_model_that_does_not_exist(inputs, capsys):
    out = inputs / "emb.npy"
    assert_fails(capsys, ["teacher-cache", "--model", str(inputs / "no-teacher" / "model"), "--corpus",
                          str(inputs / "corpus.txt"), "--out", str(out)],
                 "teacher model folder not found", "no-teacher", outputs=[out])


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_with_a_different_tokenizer(inputs, capsys):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder

    teacher = build_encoder(BackboneConfig(model="random", pooler="cls"), seed=3)
    teacher.tokenizer.add_tokens(["<teacher-only-token>"])  # a vocabulary the student does not have
    teacher.backbone.resize_token_embeddings(len(teacher.tokenizer))
    teacher.save(inputs / "teacher" / "model")
    cache = inputs / "teacher" / "embeddings.npy"
    rc, err = run_cli(capsys, ["teacher-cache", "--model", str(inputs / "teacher" / "model"), "--corpus",
                               str(inputs / "corpus.txt"), "--out", str(cache), "--max-seq-length", "32"])
    assert rc == 0, err
    cfg = write_config(inputs / "over.yaml", {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}}}}}})
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg) + ["--teacher-cache", str(cache)],
                 f"teacher cache {cache}", "uses a different tokenizer than the student", outputs=[out])


def test_teacher_cache_max_seq_length_past_the_positions_is_refused(inputs, capsys, tiny_encoder):
    tiny_encoder().save(inputs / "teacher")
    out = inputs / "emb.npy"
    assert_fails(capsys, ["teacher-cache", "--model", str(inputs / "teacher"), "--corpus", str(inputs / "corpus.txt"),
                          "--out", str(out), "--max-seq-length", "500"],
                 "--max-seq-length is 500, longer than the backbone takes (128 positions", outputs=[out])


# ------------------------------------------------ models as teachers: a run of your own, a model folder, minilm


def _own_run(inputs, capsys, method, out, *extra):
    argv = ["train", "--backbone", "tiny", "--method", method, "--corpus", str(inputs / "corpus.txt"), "--senteval",
            str(inputs / "se"), "--out", str(out), "--cache-dir", str(inputs / "cache"), "--no-progress", "--no-sts",
            "--set", "training.batch_size=8", "--set", "training.max_steps=2", "--set", "training.eval_steps=2",
            "--set", "training.dev_max_pairs=8", *extra]
    rc, err = run_cli(capsys, argv)
    assert rc == 0, err
    return json.loads((out / "model" / "training_config.json").read_text())


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_a_run_of_your_own_teaches_a_run_of_your_own(inputs, capsys):
    """`csebench train --method distillcse --teacher RUN_DIR`: the folder a `csebench train` wrote teaches (before:
    "suite 'cli' has no run 'model-simcse'"); its cache is built once in --cache-dir/teachers, on the student's corpus
    at its max length, naming the teacher by its run's key and seed, as the student's key does; its cosines are the
    teacher model's own; a second student reads it again."""
    teacher = _own_run(inputs, capsys, "simcse", inputs / "simcse")
    student = _own_run(inputs, capsys, "distillcse", inputs / "distill", "--teacher", str(inputs / "simcse"))
    ident = f"run {teacher['key']}/seed42"
    assert student["objectives"]["distillation"]["teachers"] == [{"model": str(inputs / "simcse" / "model")}]
    assert list(student["teacher_keys"].values()) == [ident]
    (cache,) = (inputs / "cache" / "teachers").glob("*.npy")
    meta = json.loads(meta_path(cache).read_text())
    assert meta["teacher"] == ident and meta["max_seq_length"] == 32 and meta["rows"] == 64
    sentences = (inputs / "corpus.txt").read_text(encoding="utf-8").splitlines()
    own = torch.nn.functional.normalize(load_encoder(inputs / "simcse" / "model").encode(sentences, max_length=32), dim=-1)
    assert np.allclose(np.load(cache), own.numpy(), atol=1e-5)
    built = cache.stat().st_mtime_ns
    again = _own_run(inputs, capsys, "distillcse", inputs / "distill2", "--teacher", str(inputs / "simcse" / "model"))
    assert again["key"] == student["key"] and cache.stat().st_mtime_ns == built  # its model/ names the same teacher


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_cache_takes_what_eval_sts_takes_and_a_given_cache_serves_its_model(inputs, capsys):
    """`teacher-cache --model minilm` (before: "teacher model folder not found: packaged:minilm"); that cache given
    with --teacher-cache serves the --teacher it names (nothing is built), and a cache of another model is refused."""
    cache = inputs / "minilm.npy"
    rc, err = run_cli(capsys, ["teacher-cache", "--model", "minilm", "--corpus", str(inputs / "corpus.txt"), "--out",
                               str(cache), "--max-seq-length", "32"])
    assert rc == 0, err
    assert json.loads(meta_path(cache).read_text())["teacher"] == "packaged:minilm"
    student = _own_run(inputs, capsys, "distillcse", inputs / "distill", "--teacher", "minilm", "--teacher-cache", str(cache))
    assert student["objectives"]["distillation"]["teachers"] == [{"model": "packaged:minilm"}]
    assert not (inputs / "cache" / "teachers").exists()
    meta = json.loads(meta_path(cache).read_text())
    meta["teacher"] = "someone/else"
    meta_path(cache).write_text(json.dumps(meta))
    out = inputs / "refused"
    assert_fails(capsys, ["train", "--backbone", "tiny", "--method", "distillcse", "--corpus", str(inputs / "corpus.txt"),
                          "--senteval", str(inputs / "se"), "--out", str(out), "--cache-dir", str(inputs / "c2"),
                          "--no-sts", "--teacher", "minilm", "--teacher-cache", str(cache), "--set", "training.max_steps=1"],
                 "names 1 teacher(s) (packaged:minilm) but 2 teacher cache(s) were given", outputs=[out])


@pytest.mark.parametrize("argv,needle", [
    (["--method", "simcse", "--teacher", "minilm"], "--teacher: method simcse learns from no teacher"),
    (["--method", "distillcse", "--teacher", "no/such/folder/"], "model folder not found: no/such/folder/; --teacher takes"),
    (["--method", "distillcse", "--teacher", "minilm", "--set", "objectives.distillation.teachers={model: minilm}"],
     "--teacher and --set objectives.distillation.teachers both name teachers"),
])
def test_teacher_mistakes_are_one_line_and_leave_no_run_folder(inputs, capsys, argv, needle):
    out = inputs / "run"
    line = assert_fails(capsys, ["train", "--backbone", "tiny", "--corpus", str(inputs / "corpus.txt"), "--out", str(out),
                                 "--cache-dir", str(inputs / "c"), *argv], needle, outputs=[out, inputs / "c"])
    if "learns from no teacher" in needle:
        assert "distillcse" in line and "dclr" in line and "rankcse" in line


def test_a_suites_model_teacher_is_no_job_and_keys_by_its_run(tmp_path, trained):
    """In a suite, teachers: {model: M} beside {run: NAME}: only the run is a teacher job; the student's key names
    the model teacher by the key and seed of the run it is (its folder's place does not change the key), a backbone
    name by its model."""
    from csebench.study.typed import Params
    from runhelpers import PARAMS, copy_run

    def student(teachers):
        raw = Params.load(PARAMS).raw_copy()
        run = next(r for r in raw["suites"]["demo"]["runs"] if r["name"] == "distillcse")
        run["objectives"]["distillation"]["teachers"] = teachers
        return Params(raw).suite("demo")

    moved = copy_run(trained, tmp_path / "elsewhere" / "run")
    a, b = (student([{"model": str(t)}, {"run": "simcse", "seeds": [42]}]) for t in (trained, moved))
    assert a.teacher_jobs("distillcse", 42) == [("simcse", 42)]
    key = json.loads((trained / "model" / "training_config.json").read_text())["key"]
    ident = a.resolve("distillcse", 42).identity()["objectives"]["distillation"]["teachers"]
    assert ident[0] == {"model": f"run {key}/seed1"}
    assert a.resolve("distillcse", 42).key() == b.resolve("distillcse", 42).key()
    named = student({"model": "minilm"}).resolve("distillcse", 42)
    assert named.objectives["distillation"]["teachers"] == {"model": "packaged:minilm"}
