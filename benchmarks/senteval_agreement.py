"""Agreement of csebench's STS / transfer evaluators with SentEval itself, for the same encoder.

SentEval is not vendored: pass the folder of a SentEval checkout (the one containing the
``senteval`` package, e.g. SimCSE's ``SentEval/``) with --senteval-src. Both sides embed with the
same model and pooler ("cls_before_pooler", SimCSE's evaluation.py batcher: raw CLS of the last
layer, sentences = ' '.join(tokens), dynamic padding); SentEval runs in SimCSE's "test" mode.

    python benchmarks/senteval_agreement.py --senteval-src /path/to/SentEval \
        --data /work/shared/senteval --sts STS12 STSBenchmark SICKRelatedness --transfer TREC MRPC

Prints one row per task (SentEval, csebench, difference, tolerance) and exits 1 if any task is
outside its tolerance (STS 0.01 Spearman x100, transfer 0.5 accuracy points). On a busy machine the
sides and task groups can run as parallel processes (--side ... --out part.json) and be combined
with --merge part1.json part2.json ...
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

STS_TOL = 0.01
TRANSFER_TOL = 0.5


def senteval_scores(src: str, data: str, model_dir: str, sts: list[str], transfer: list[str]) -> tuple[dict, dict]:
    sys.path.insert(0, os.path.abspath(src))
    import senteval  # noqa: E402  (from --senteval-src)
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()

    def batcher(params, batch):
        sentences = [" ".join(s) for s in batch]
        enc = tok(sentences, padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, return_dict=True)
        return out.last_hidden_state[:, 0].numpy()

    params = {"task_path": data, "usepytorch": True, "kfold": 10,
              "classifier": {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}}
    scores, seconds = {}, {}
    for task in sts + transfer:
        t0 = time.perf_counter()
        res = senteval.engine.SE(params, batcher, lambda p, s: None).eval(task)
        seconds[task] = round(time.perf_counter() - t0, 1)
        if task in ("STSBenchmark", "SICKRelatedness"):
            scores[task] = float(res["test"]["spearman"][0] * 100)
        elif task.startswith("STS"):
            scores[task] = float(res["all"]["spearman"]["all"] * 100)
        else:
            scores[task] = float(res["acc"])
        print(f"  SentEval {task}: {scores[task]:.4f} ({seconds[task]}s)", flush=True)
    return scores, seconds


def csebench_scores(data: str, model_dir: str, sts: list[str], transfer: list[str]) -> tuple[dict, dict]:
    from csebench.evaluation.locate import senteval_root
    from csebench.model.encoder import load_encoder
    from csebench.evaluation.sts import evaluate_sts
    from csebench.evaluation.transfer import evaluate_transfer

    enc = load_encoder(model_dir, "cls_before_pooler")
    root = senteval_root(data)
    encode = lambda s: enc.encode(s, batch_size=128)  # noqa: E731
    scores, seconds = {}, {}
    if sts:
        t0 = time.perf_counter()
        scores.update(evaluate_sts(encode, root, sts)["tasks"])
        seconds["STS (all requested)"] = round(time.perf_counter() - t0, 1)
    if transfer:
        t0 = time.perf_counter()
        res = evaluate_transfer(encode, root, transfer)
        scores.update(res["tasks"])
        seconds["transfer (all requested)"] = round(time.perf_counter() - t0, 1)
        seconds.update({f"  {k} classifiers": v for k, v in res["classifier_seconds"].items()})
    return scores, seconds


def compare(ours: dict, ref: dict, sts: list[str], transfer: list[str]) -> tuple[list[dict], bool]:
    rows, ok = [], True
    print(f"\n{'task':<16} {'SentEval':>10} {'csebench':>10} {'diff':>8} {'tol':>6}  ok")
    for task in sts + transfer:
        tol = STS_TOL if task in sts else TRANSFER_TOL
        diff = ours[task] - ref[task]
        good = abs(diff) <= tol
        ok &= good
        rows.append({"task": task, "senteval": ref[task], "csebench": ours[task], "diff": diff, "tol": tol, "ok": good})
        print(f"{task:<16} {ref[task]:>10.4f} {ours[task]:>10.4f} {diff:>+8.4f} {tol:>6}  {'yes' if good else 'NO'}")
    return rows, ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--senteval-src", help="folder containing the senteval package")
    p.add_argument("--data", help="SentEval data folder (with downstream/)")
    p.add_argument("--model", default="packaged:minilm", help="model folder (default: packaged MiniLM)")
    p.add_argument("--sts", nargs="*", default=["STS12", "STSBenchmark", "SICKRelatedness"])
    p.add_argument("--transfer", nargs="*", default=["TREC", "MRPC"])
    p.add_argument("--side", choices=["both", "csebench", "senteval"], default="both",
                   help="run one side only and write its scores to --out (combine the parts with --merge)")
    p.add_argument("--merge", nargs="+", default=None, help="combine --side JSON files into the comparison")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None, help="write the comparison (or one side's scores) as JSON")
    args = p.parse_args(argv)
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "model": args.model}
    if args.merge:
        parts = [json.load(open(f)) for f in args.merge]
        ours = {k: v for part in parts for k, v in part.get("csebench", {}).items()}
        ref = {k: v for part in parts for k, v in part.get("senteval", {}).items()}
        sts = [t for part in parts for t in part.get("sts", []) if t in ours and t in ref]
        transfer = [t for part in parts for t in part.get("transfer", []) if t in ours and t in ref]
        rows, ok = compare(ours, ref, list(dict.fromkeys(sts)), list(dict.fromkeys(transfer)))
        if args.out:
            with open(args.out, "w") as fh:
                json.dump({"rows": rows, "parts": parts}, fh, indent=2)
        return 0 if ok else 1
    if args.side != "csebench" and not (args.senteval_src and os.path.isdir(os.path.join(args.senteval_src, "senteval"))):
        p.error(f"--senteval-src {args.senteval_src}: no senteval/ package there")
    if not (args.data and os.path.isdir(os.path.join(args.data, "downstream"))):
        p.error(f"--data {args.data}: no downstream/ folder there")
    if args.threads:
        torch.set_num_threads(args.threads)
    from csebench.model.encoder import resolve_model_path

    model_dir = resolve_model_path(args.model)
    part = {"sts": args.sts, "transfer": args.transfer, "info": info}
    if args.side in ("both", "csebench"):
        print("csebench ...", flush=True)
        part["csebench"], part["seconds_csebench"] = csebench_scores(args.data, model_dir, args.sts, args.transfer)
        print("  csebench:", json.dumps(part["csebench"]), json.dumps(part["seconds_csebench"]), flush=True)
    if args.side in ("both", "senteval"):
        print("SentEval ...", flush=True)
        part["senteval"], part["seconds_senteval"] = senteval_scores(args.senteval_src, args.data, model_dir,
                                                                     args.sts, args.transfer)
    ok = True
    if args.side == "both":
        part["rows"], ok = compare(part["csebench"], part["senteval"], args.sts, args.transfer)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(part, fh, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
