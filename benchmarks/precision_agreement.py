"""The demo's evaluation at a faster precision against fp32, at demo-scale caps (by default those the int8 table of
docs/senteval-agreement.md was measured at, 2026-11-28: STS 500 pairs a task, transfer 250 training and 250 held-out
sentences a task; the demo's caps today: --max-sts-pairs 250 --max-transfer 150), the same model encoded once per
precision.

    python benchmarks/precision_agreement.py                         # the packaged MiniLM, fp32 against int8
    python benchmarks/precision_agreement.py --model results/demo/runs/simcse/seed42/model --precisions fp32 int8 bf16

Prints one row per precision (each task's score, the averages, the encoding time of every evaluation sentence on
one thread) and the differences to the first precision; --out writes the same as JSON. docs/senteval-agreement.md
quotes its output; benchmarks/slow_class.sh in front gives the AVX2-only timings.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="packaged:minilm")
    ap.add_argument("--pooler", default="avg")
    ap.add_argument("--senteval", default=None, help="SentEval data (default: params.yaml's shared senteval)")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    ap.add_argument("--max-sts-pairs", type=int, default=500)
    ap.add_argument("--max-transfer", type=int, default=250)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    import torch

    from csebench.evaluation.embeddings import evaluation_sentences, load_eval_model
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts
    from csebench.evaluation.transfer import evaluate_transfer
    from csebench.study.params import load_params, shared_dir

    torch.set_num_threads(1)
    root = senteval_root(args.senteval or os.path.join(shared_dir(load_params()), "senteval"))
    enc = load_eval_model(args.model, args.pooler)
    sentences = evaluation_sentences(root, transfer=True, max_train_sentences=args.max_transfer,
                                     max_sts_pairs=args.max_sts_pairs, max_test_sentences=args.max_transfer)
    table = {s: i for i, s in enumerate(sentences)}
    rows = {}
    for precision in args.precisions:
        t0 = time.perf_counter()
        emb = enc.encode(sentences, precision=precision)
        seconds = time.perf_counter() - t0

        def lookup(batch, emb=emb):
            return emb[torch.as_tensor([table[s] for s in batch])]

        sts = evaluate_sts(lookup, root, max_pairs=args.max_sts_pairs)
        transfer = evaluate_transfer(lookup, root, max_train_sentences=args.max_transfer,
                                     max_test_sentences=args.max_transfer)
        rows[precision] = {"sts": sts["tasks"], "sts_avg": sts["avg"], "transfer": transfer["tasks"],
                           "transfer_avg": transfer["avg"], "encode_s": round(seconds, 1), "sentences": len(sentences)}
        print(f"{precision}: encoded {len(sentences)} sentences in {seconds:.1f} s; STS avg {sts['avg']:.2f}, "
              f"transfer avg {transfer['avg']:.2f}", flush=True)
    first = args.precisions[0]
    for precision in args.precisions[1:]:
        a, b = rows[first], rows[precision]
        sts = {t: round(b["sts"][t] - a["sts"][t], 2) for t in a["sts"]}
        tr = {t: round(b["transfer"][t] - a["transfer"][t], 2) for t in a["transfer"]}
        d = b["minus_" + first] = {"sts": sts, "sts_avg": round(b["sts_avg"] - a["sts_avg"], 2),
                                   "transfer": tr, "transfer_avg": round(b["transfer_avg"] - a["transfer_avg"], 2),
                                   "speedup": round(a["encode_s"] / b["encode_s"], 2)}
        print(f"{precision} - {first}: STS {sts} avg {d['sts_avg']:+.2f}; transfer {tr} avg {d['transfer_avg']:+.2f}; "
              f"encoding {d['speedup']}x faster", flush=True)
    if args.out:
        from csebench.core.io import write_json

        write_json(args.out, {"model": args.model, "cpu": platform.processor() or platform.machine(),
                              "torch": torch.__version__, "rows": rows})


if __name__ == "__main__":
    main()
