# Every evaluation sentence of a trained model encoded once (STS tasks, STS-B dev/test, the transfer
# tasks after the suite's cap): eval_sts, eval_transfer and the STS-based analyses look sentences up
# in this table instead of running the model again. `evaluation: {precision: ...}` in a suite sets
# the precision (fp32 by default). A run is evaluated once per set of evaluation settings, in
# results/runs/{key}/seed{seed}/{ev} ({ev} names the settings: csebench.workflow.eval_name); your own
# STS test sets (`evaluation: {sts_pairs: [...]}`) are such a setting, encoded here too.


def eval_settings(w):  # a run's job: the settings its {ev} folder names; a suite's job: the suite's
    return RUNS.eval_settings(w.ev) if hasattr(w, "ev") else wf.suite_evaluation(PARAMS, w.suite)


def transfer_cap(w):  # `transfer: {max_train_sentences: N, max_test_sentences: M}` (CPU demo only)
    ev = eval_settings(w)
    caps = [f"--max-train-sentences {ev['max_train_sentences']}" if ev["max_train_sentences"] else "",
            f"--max-test-sentences {ev['max_test_sentences']}" if ev["max_test_sentences"] else ""]
    return " ".join(c for c in caps if c)


def sts_cap(w):  # `evaluation: {max_sts_pairs: N}` (CPU demo only): embed and eval_sts use the same subsets
    cap = eval_settings(w)["max_sts_pairs"]
    return f"--max-sts-pairs {cap}" if cap else ""


def sts_pairs_of(w):  # `evaluation: {sts_pairs: [NAME, ...]}`: your own STS test sets, part of the settings {ev} names
    return list(wf.sts_sets(PARAMS, eval_settings(w)).values())


def sts_pairs_args(w):  # embed and eval_sts read the same sets
    sets = wf.sts_sets(PARAMS, eval_settings(w))
    return f"--sts-pairs {' '.join(f'{name}={path}' for name, path in sets.items())}" if sets else ""


def embeddings_of(w):
    return f"{key_dir(RESULTS, w.key, w.seed)}/{w.ev}/embeddings.npz"


rule embed:
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        sts_pairs=sts_pairs_of,
    output:
        f"{EVAL}/embeddings.npz",
    params:
        cap=lambda w: " ".join(a for a in (transfer_cap(w), sts_cap(w), sts_pairs_args(w)) if a),
        precision=lambda w: eval_settings(w)["precision"],
    threads: config.get("threads", 4)
    resources:
        gpu=1,  # a forward pass over ~30k (capped) to ~140k (full transfer) sentences: GPU work at paper scale
    log:
        f"{EVAL}/logs/embed.log",
    shell:
        "csebench --threads {threads} embed --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " {params.cap} --precision {params.precision} --out {output} {PROGRESS} 2> {log}"
