# Every evaluation sentence of a trained model encoded once (STS tasks, STS-B dev/test, the transfer
# tasks after the suite's cap): eval_sts, eval_transfer and the STS-based analyses look sentences up
# in this table instead of running the model again. `evaluation: {precision: ...}` in a suite sets
# the precision (fp32 by default). A run is evaluated once per set of evaluation settings, in
# results/runs/{key}/seed{seed}/{ev} ({ev} names the settings: csebench.study.jobs.eval_name); your own
# STS test sets (`evaluation: {sts_pairs: [...]}`) are such a setting, encoded here too.


rule embed:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        sts_pairs=sts_pairs_of,
    output:
        table=f"{EVAL}/embeddings.npz",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        cap=lambda w: [*transfer_cap(w), *sts_cap(w), *sts_pairs_args(w)],
        precision=lambda w: eval_settings(w)["precision"],
        progress=PROGRESS,
    threads: config.get("threads", 4)
    resources:
        gpu=1,  # a forward pass over ~30k (capped) to ~140k (full transfer) sentences: GPU work at paper scale
    log:
        f"{EVAL}/logs/embed.log",
    shell:
        "csebench --threads {threads} embed {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --senteval \"$(dirname {input.senteval:q})\" {params.cap:q} --precision {params.precision:q} --out {output.table:q}"
        " {params.progress:q} 2> {log:q}"
