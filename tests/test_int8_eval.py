"""int8 evaluation: a screening precision asked for by name (`--precision int8`, a suite's `evaluation: {precision:
int8}`), never a default: which precisions resolve to it and where, that the model itself is never touched, that its
STS scores stay within a stated distance of fp32 on the packaged MiniLM, and that no suite of params.yaml takes it.
"""

from __future__ import annotations

import pytest
import torch

from csebench.core.errors import ConfigError


@pytest.mark.parametrize("native_bf16", [False, True])
def test_only_int8_by_name_means_int8_and_only_on_a_cpu(monkeypatch, native_bf16):
    """"fast" on a CPU without bf16 stays fp32: int8 moves the demo's transfer scores too far to be a default
    (docs/senteval-agreement.md)."""
    from csebench.model import encoder

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    monkeypatch.setattr(encoder, "cpu_has_native_bf16", lambda: native_bf16)
    for precision in ("fp32", "auto", "bf16", "fast"):
        assert not encoder.eval_int8(precision, cpu) and not encoder.eval_int8(precision, gpu)
    assert encoder.autocast_name("fast", cpu) == ("bfloat16" if native_bf16 else "fp32")
    assert encoder.eval_int8("int8", cpu) and encoder.autocast_name("int8", cpu) == "int8"
    assert encoder.eval_autocast_dtype("int8", cpu) is None  # no autocast beside the quantized layers
    with pytest.raises(ConfigError, match="CPU only"):
        encoder.eval_int8("int8", gpu)


def test_int8_encoding_leaves_the_model_as_it_was_and_stays_close_to_fp32(tiny_encoder):
    enc = tiny_encoder("avg")
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    sents = ["a b c d e f", "x", "hello there world", "the cat sat on the mat", "x"]
    fp32, int8 = enc.encode(sents, precision="fp32"), enc.encode(sents, precision="int8")
    assert not torch.equal(fp32, int8)  # the quantized layers really ran
    assert torch.equal(int8[1], int8[4])  # each distinct sentence once, rows in input order
    assert torch.nn.functional.cosine_similarity(fp32, int8).min() > 0.95
    after = enc.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert all(type(m) is torch.nn.Linear for m in enc.modules() if isinstance(m, torch.nn.Linear))
    assert torch.equal(enc.encode(sents, precision="fp32"), fp32)  # fp32 afterwards: as before


def test_int8_sts_on_the_demo_backbone_stays_within_its_stated_bound(shared_dir):
    """The packaged MiniLM on the 7 STS tasks at 100 pairs each: int8 against fp32 (measured: -0.38 on average, -2.32
    to +1.89 per task; at 500 pairs -0.68, at most 1.26). docs/senteval-agreement.md has the demo's caps (and transfer)."""
    from csebench.evaluation.embeddings import load_eval_model
    from csebench.evaluation.sts import evaluate_sts

    enc = load_eval_model("packaged:minilm", "avg")
    scores = {p: evaluate_sts(lambda s, p=p: enc.encode(list(s), precision=p), shared_dir / "senteval" / "downstream", max_pairs=100)["tasks"]
              for p in ("fp32", "int8")}
    tasks = list(scores["fp32"])
    assert len(tasks) == 7, scores["fp32"]
    diffs = {t: scores["int8"][t] - scores["fp32"][t] for t in tasks}
    assert any(d != 0 for d in diffs.values())  # int8 really ran
    assert max(abs(d) for d in diffs.values()) < 3.5, diffs
    assert abs(sum(diffs.values()) / len(diffs)) < 1.5, diffs


def test_no_suite_evaluates_in_int8():
    """int8 stays a choice of yours: the papers' rows are fp32, the demo's "fast" (bf16 where native, else fp32)."""
    from csebench.study.params import load_params

    suites = load_params()["suites"]
    assert any((s.get("evaluation") or {}).get("precision") == "fast" for s in suites.values())  # read as written
    for name, suite in suites.items():
        asked = {(suite.get("evaluation") or {}).get("precision"), (suite.get("training") or {}).get("eval_precision")}
        assert "int8" not in asked, f"suite {name} evaluates in int8"
        if "fast" in asked:  # bf16 or fp32: still only where a CPU demo is the point
            assert suite.get("data") == "demo", f"suite {name} evaluates at {asked} on {suite.get('data')} data"
