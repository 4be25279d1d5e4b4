# What a suite sees of its runs (docs/runs.md): results/{suite}/runs/{run}/seed{seed} and
# results/{suite}/analysis/{run}/seed{seed} are views of the run's own folder (results/runs/{key}/seed{seed}),
# which every suite listing the run shares. `csebench view-run` copies the JSON results with this suite's
# names in them (reports and figures show this suite's run) and links the rest (model/, curves, pairs).
# Local jobs of a second or so: no cluster submission.

localrules: view_trained, view_evaluated, view_probing, view_analysis

VIEW = f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}"
VIEW_CMD = ("csebench view-run {params.cfg} --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed}"
            " --first {params.first} --from $(dirname {input[0]}) --out $(dirname {output[0]})")


def first_of_view(w):  # 'suite/run' that names the run (a change reruns only these views: their same_run_as)
    return "/".join(RUNS.first(RUNS.key(w.suite, w.run), int(w.seed)))


def run_files(*names, evaluated=False):
    def files(w):
        folder = (RUNS.eval_folder if evaluated else RUNS.folder)(w.suite, w.run, int(w.seed))
        return [f"{folder}/{n}" for n in names]
    return files


rule view_trained:
    input:
        run_files("train.json", "train_curve.csv", "dev_curve.csv"),
    output:
        f"{VIEW}/train.json",
        f"{VIEW}/train_curve.csv",
        f"{VIEW}/dev_curve.csv",
    params:
        first=first_of_view,
        cfg=PARAMS_ARGS,
    log:
        f"{RESULTS}/{{suite}}/logs/view.{{run}}.seed{{seed}}.log",
    shell:
        VIEW_CMD + " train.json train_curve.csv dev_curve.csv model 2> {log}"


rule view_evaluated:
    input:
        run_files("sts.json", "sts_pairs.npz", "transfer.json", "embeddings.npz", evaluated=True),
    output:
        f"{VIEW}/sts.json",
        f"{VIEW}/sts_pairs.npz",
        f"{VIEW}/transfer.json",
    params:
        first=first_of_view,
        cfg=PARAMS_ARGS,
    log:
        f"{RESULTS}/{{suite}}/logs/view.eval.{{run}}.seed{{seed}}.log",
    shell:
        VIEW_CMD + " sts.json sts_pairs.npz transfer.json embeddings.npz 2> {log}"


rule view_probing:
    input:
        run_files("probing.json", evaluated=True),
    output:
        f"{VIEW}/probing.json",
    params:
        first=first_of_view,
        cfg=PARAMS_ARGS,
    log:
        f"{RESULTS}/{{suite}}/logs/view.probing.{{run}}.seed{{seed}}.log",
    shell:
        VIEW_CMD + " probing.json 2> {log}"


rule view_analysis:  # a per-run analysis (analysis.smk); model_correlation is the suite's own (its groups)
    input:
        lambda w: run_files(f"analysis/{w.analysis}.{w.ext}", evaluated=True)(w),
    output:
        f"{RESULTS}/{{suite}}/analysis/{{run}}/seed{{seed}}/{{analysis}}.{{ext}}",
    wildcard_constraints:
        analysis="align_uniform|cosine_dist|layers|embed_dim|neighbours|token_matrix|distill_loss",
        ext="json|md",
    params:
        first=first_of_view,
        cfg=PARAMS_ARGS,
    log:
        f"{RESULTS}/{{suite}}/logs/view.analysis.{{analysis}}.{{ext}}.{{run}}.seed{{seed}}.log",
    shell:
        VIEW_CMD + " {wildcards.analysis}.{wildcards.ext} 2> {log}"
