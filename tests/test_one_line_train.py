"""A run of your own (`csebench train --backbone B --method M --corpus FILE`): the pooler it trains and is evaluated
with (its backbone's, `--pooler`, the model's own, or what its method needs), its closing comparison of the trained
model with the untrained backbone under that pooler, and its last line."""

from __future__ import annotations

import dataclasses
import json
import logging
import re

import pytest

from runhelpers import PARAMS, write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")


def _one_line(backbone: str, pooler: str | None = None, method: str = "simcse"):
    from csebench.study.typed import Params

    params, suite, run = Params.load(PARAMS).with_run_of_your_own(backbone, method, "my.txt", {}, pooler, 42)
    return params, params.suite(suite).resolve(run, 42)


def _suite_key(backbone_spec: dict, method: str = "simcse") -> str:
    """The key of the run a suite of params.yaml lists on a backbone entry ``backbone_spec`` and corpus my.txt."""
    from csebench.study.typed import Params

    raw = Params.load(PARAMS).raw_copy()
    raw["backbones"]["mine"] = backbone_spec
    raw["data"]["mine"] = {"corpus": {"path": "my.txt"}, "senteval": {"path": "{shared}/senteval"}}
    raw["suites"]["mine"] = {"data": "mine", "seeds": [42], "runs": [{"name": "r", "backbone": "mine", "method": method}]}
    return Params(raw).suite("mine").resolve("r", 42).key()


def test_pooler_works_with_a_backbone_name_and_keys_the_run_as_a_suite_would():
    """`--pooler` with a backbone name of params.yaml is that backbone with the pooler: the run's key is the one a
    suite gives the same model and pooler (a backbone's name and label are not in a key); the backbone's own pooler
    given again changes nothing."""
    _, minilm = _one_line("minilm")
    assert minilm.backbone.pooler == "avg" and minilm.pooler_origin == "backbones.minilm.pooler (avg)"
    assert minilm.key() == _suite_key({"model": "packaged:minilm", "pooler": "avg", "label": "x"})
    assert _one_line("minilm", "avg")[1].key() == minilm.key()
    _, cls = _one_line("minilm", "cls")
    assert (cls.backbone.model, cls.backbone.pooler, cls.name) == ("packaged:minilm", "cls", "minilm-cls-simcse")
    assert cls.key() != minilm.key() and cls.key() == _suite_key({"model": "packaged:minilm", "pooler": "cls"})
    bert = _one_line("bert-base", "avg")[1]  # the backbone's other settings come along (its training overrides too)
    assert bert.key() == _suite_key({"model": "bert-base-uncased", "pooler": "avg"})


def test_a_folder_or_hub_id_trains_with_the_pooling_it_declares(tmp_path, tiny_encoder):
    """A sentence-transformers folder without --pooler: its own Pooling module's mode (mean -> avg); a folder that
    declares none: cls, SimCSE's."""
    from csebench.cli import build_parser
    from csebench.study.typed import Params
    from csebench.training.cli import _one_line_run

    st = tmp_path / "st"
    enc = tiny_encoder("avg")
    enc.save(st)  # csebench writes sentence-transformers' files: modules.json, 1_Pooling/config.json (mean)
    (st / "csebench_encoder.json").unlink()  # a plain sentence-transformers folder
    plain = tmp_path / "plain"
    tiny_encoder("cls").backbone.save_pretrained(plain)
    tiny_encoder("cls").tokenizer.save_pretrained(plain)

    def pooled(folder, pooler=None):
        args = build_parser().parse_args(
            ["train", "--backbone", str(folder), "--method", "simcse", "--corpus", "my.txt"] +
            (["--pooler", pooler] if pooler else []))
        args.seed = 42
        params = _one_line_run(args, Params.load(PARAMS))
        return params.suite(args.suite).resolve(args.run, 42).backbone.pooler

    assert pooled(st) == "avg" and pooled(plain) == "cls" and pooled(st, "avg_first_last") == "avg_first_last"


def test_a_method_that_needs_another_pooler_says_so():
    """DiffCSE's BatchNorm training head is the cls pooler's: on MiniLM (avg) the run pools with cls, and says why;
    a template method's representation is its [MASK] state; any other run pools with its backbone's pooler."""
    _, diffcse = _one_line("minilm", method="diffcse")
    assert diffcse.backbone.pooler == "cls"
    assert re.fullmatch(r"cls, not backbones.minilm.pooler avg: method diffcse's training head \(projection_head "
                        r"batchnorm, DiffCSE's BatchNorm MLP\) is the cls pooler's", diffcse.pooler_origin)
    assert diffcse.key() == _suite_key({"model": "packaged:minilm", "pooler": "cls"}, "diffcse")
    _, prompt = _one_line("minilm", method="promptbert")
    assert prompt.backbone.pooler == "avg" and prompt.pooler_origin.startswith("the [MASK] state of method promptbert")
    assert _one_line("tiny", method="gs_infonce")[1].pooler_origin == "backbones.tiny.pooler (cls)"


def test_train_ends_with_the_trained_model_beside_the_untrained_backbone(tmp_path, small, capsys, caplog):
    """The closing lines: the 7 STS tasks of the trained model and of the untrained backbone, both with the run's
    evaluation pooler, their difference and the run's folder; the same numbers as evaluating the trained model
    folder and the untrained backbone (an evaluation-only run of it, `train: false`) separately; the JSON in
    sts_vs_untrained.json; the last line readable, the summary in train.json."""
    from csebench.cli import main
    from csebench.evaluation.embeddings import model_encoder
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts
    from csebench.study.typed import Params
    from csebench.training.untrained_run import write_untrained_run

    corpus = write_corpus(tmp_path / "my.txt", 32)
    out = tmp_path / "run"
    argv = ["train", "--backbone", "tiny", "--method", "simcse", "--corpus", str(corpus), "--senteval", str(small),
            "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--max-sts-pairs", "20",
            "--set", "training.batch_size=8", "--set", "training.max_steps=3", "--set", "training.eval_steps=3",
            "--set", "training.learning_rate=1e-3"]
    caplog.set_level(logging.INFO, logger="csebench")
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    saved = json.loads((out / "sts_vs_untrained.json").read_text())
    assert saved["pooler"] == "cls_before_pooler" and saved["protocol"] == "capped" and saved["max_sts_pairs"] == 20
    root = senteval_root(small)
    trained = evaluate_sts(model_encoder(str(out / "model"), None, 128, "fp32"), root, max_pairs=20)
    assert saved["trained"]["tasks"] == pytest.approx(trained["tasks"], abs=1e-9)
    cfg = dataclasses.replace(_one_line_cfg(corpus), train=False)  # the same run, evaluation only
    write_untrained_run(cfg, small, tmp_path / "untrained")
    untrained = evaluate_sts(model_encoder(str(tmp_path / "untrained" / "model"), None, 128, "fp32"), root, max_pairs=20)
    assert saved["untrained"]["tasks"] == pytest.approx(untrained["tasks"], abs=1e-4)
    assert saved["trained"]["tasks"] != saved["untrained"]["tasks"]  # three steps at lr 1e-3 moved the model
    assert printed[0].startswith("STS, Spearman x100, both pooled with cls_before_pooler (capped: about 20 pairs")
    assert printed[1].split() == ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "avg"]
    rows = {line.rsplit(None, 8)[0]: [float(x) for x in line.split()[-8:]] for line in printed[2:5]}
    assert rows["untrained tiny"] == pytest.approx([*untrained["tasks"].values(), untrained["avg"]], abs=0.006)
    assert rows["tiny-simcse/seed42"] == pytest.approx([*trained["tasks"].values(), trained["avg"]], abs=0.006)
    assert rows["difference"] == pytest.approx([a - b for a, b in zip(rows["tiny-simcse/seed42"], rows["untrained tiny"])], abs=0.011)
    assert printed[5] == f"{out}: model/, train.json, sts_vs_untrained.json"
    # then its model card, made with that comparison (the numbers as printed), and the suite that lists the run
    assert printed[6] == f"model card: {out / 'model' / 'README.md'} (and {out / 'model_card.md'})"
    card = (out / "model" / "README.md").read_text()
    assert card == (out / "model_card.md").read_text() and "Not evaluated" not in card
    assert "### STS (SentEval): the closing comparison of `csebench train`" in card
    assert f"| this model | {' | '.join(f'{v:.2f}' for v in rows['tiny-simcse/seed42'])} |" in card
    assert "| difference | " in card and "Objective: SimCSE's InfoNCE alone (no other objective term)." in card
    assert "(none: SimCSE alone)" not in card
    suite_file = out / "suite.yaml"
    assert "\n".join(printed[7:]) + "\n" == suite_file.read_text()
    key = _one_line_cfg(corpus).key()
    assert printed[7].startswith(f"# A suite that lists run tiny-simcse/seed42 (key {key})")
    mine = Params.load(PARAMS, [suite_file]).suite("mine")
    assert mine.resolve(mine.runs()[0]["name"], 42).key() == key  # merged over params.yaml: the same run
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("done: ")]
    summary = json.loads((out / "train.json").read_text())
    assert done == [f"done: tiny-simcse/seed42: 3 steps, STS-B dev {summary['stsb_dev_best']:.2f} at step "
                    f"{summary['best_step']}; {out} (model/, train.json)"]
    assert any(r.getMessage() == "tiny-simcse/seed42 pools with cls (its MLP head in training only), evaluated with "
               "cls_before_pooler: backbones.tiny.pooler (cls)" for r in caplog.records)
    # the untrained backbone's scores are kept with the corpus cache: a run trained again reads them
    cached = list((tmp_path / "cache").glob("untrained-sts-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["scores"]["tasks"] == saved["untrained"]["tasks"]
    caplog.clear()
    assert main(argv + ["--force"]) == 0
    again = json.loads((out / "sts_vs_untrained.json").read_text())
    assert again["untrained"] == saved["untrained"] and again["trained"]["tasks"] == pytest.approx(saved["trained"]["tasks"], abs=1e-9)
    assert any(r.getMessage() == f"untrained tiny: its STS scores from {cached[0]}" for r in caplog.records)
    assert capsys.readouterr().out.splitlines()[2:5] == printed[2:5]
    # --no-sts: no comparison, and the one of the training it replaces is gone
    assert main(argv + ["--force", "--no-sts"]) == 0
    assert "STS, Spearman" not in capsys.readouterr().out and not (out / "sts_vs_untrained.json").exists()
    assert not (out / "sts_vs_untrained_pairs.npz").exists() and "Not evaluated" in (out / "model_card.md").read_text()


def _one_line_cfg(corpus):
    from csebench.study.typed import Params

    settings = {"training": {"batch_size": 8, "max_steps": 3, "eval_steps": 3, "learning_rate": 1e-3}}
    params, suite, run = Params.load(PARAMS).with_run_of_your_own("tiny", "simcse", str(corpus), settings, None, 42)
    return params.suite(suite).resolve(run, 42)


def test_the_untrained_scores_are_kept_by_the_backbone_s_content_not_its_path(tmp_path, tiny_encoder, small, caplog):
    """"Did training help?" answered from the cache after the backbone folder's weights were replaced at the same path
    (avg 78.02 shown, the new weights score 48.69): the cache was keyed by the path. It is keyed by the sha256 of
    every file of the folder (a hub id's by its snapshot's blob names), as the tokenized corpus is by the corpus's."""
    from csebench.evaluation.locate import senteval_root
    from csebench.training.compare import _untrained_scores

    folder = tmp_path / "backbone"
    tiny_encoder("avg", seed=0).save(folder)
    _, cfg = _one_line(str(folder))
    score = lambda: _untrained_scores(cfg, "avg", None, senteval_root(small), 20, "fp32", 64, tmp_path / "cache")  # noqa: E731
    caplog.set_level(logging.INFO, logger="csebench")
    first = score()
    assert score() == first and any(r.getMessage().startswith(f"untrained {cfg.backbone_name}: its STS scores from ")
                                    for r in caplog.records)
    tiny_encoder("avg", seed=1).save(folder)  # other weights, the same path
    caplog.clear()
    other = score()
    assert other["tasks"] != first["tasks"] and not any("its STS scores from" in r.getMessage() for r in caplog.records)
    assert len(list((tmp_path / "cache").glob("untrained-sts-*.json"))) == 2
    (folder / "README.md").write_text("a model card changes no weight\n")
    assert score() == other  # from the cache
