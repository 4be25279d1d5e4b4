# The papers' analyses (issue 4). Which ones a suite builds: `analyses:` in the Snakemake config
# (config/demo.yaml, config/ci.yaml); their settings: `analysis:` there (defaults below).
#   per model  results/{suite}/analysis/{run}/seed{seed}/{align_uniform,cosine_dist,layers,embed_dim,neighbours}.json
#              (views.smk: relabelled copies of the run's own, results/runs/{key}/seed{seed}/{ev}/analysis/,
#              computed once per run whichever suites list it; docs/runs.md)
#   per suite  results/{suite}/figures/{align_uniform,cosine_dist,layers,topk_negatives,teacher_logits}.png,
#              results/{suite}/analysis/{topk_negatives,teacher_logits}.json, results/{suite}/tables/{embed_dim,neighbours}.md

import os

from csebench.analysis import cli as _analysis_cli

ANALYSIS_DEFAULTS = {
    "topk_model": None,            # "run:NAME" (its first seed in the suite) or a model folder / packaged:minilm; None = first run
    "topk_batch_sizes": [16, 32, 64, 128, 256, 512, 1024],
    "topk_repeats": 100,
    "topk_pool_size": 4096,
    "teacher_run": None,           # DistillCSE teacher components = this run's seeds (None: the suite's DistillCSE teachers)
    "teacher_seeds": None,         # None = the seeds DistillCSE runs distil from (else the suite's seeds of teacher_run)
    "logit_batch_size": 64,
    "logit_batches": 20,
    "embed_dims": [128, 256],
    "embed_methods": ["random", "pca"],
    "buffer_size": 1024,
    "neighbours_k": 3,
    "neighbour_queries": 4,
    "split": "test",               # STS-B split of align_uniform, cosine_dist, layers
}
ASET = {**ANALYSIS_DEFAULTS, **(config.get("analysis") or {})}
PER_MODEL = ["align_uniform", "cosine_dist", "layers", "embed_dim", "neighbours"]
ANALYSES = ["align_uniform", "cosine_dist", "layers", "topk_negatives", "teacher_logits", "embed_dim", "neighbours"]


def _analyses():
    names = config.get("analyses") or []
    unknown = [a for a in names if a not in ANALYSES]
    if unknown:
        raise ValueError(f"unknown analyses {unknown} (valid: {ANALYSES})")
    return names


def _model_of(suite, run, seed):
    return f"{wf.run_dir(PARAMS, suite, run, seed)}/train.json"


def _runs(suite):
    return wf.jobs(PARAMS, suite)


def _topk_model(suite):
    """(model path, train.json dependency or None, label)."""
    m = ASET["topk_model"] or f"run:{_runs(suite)[0][0]}"
    if m.startswith("run:"):
        run = m[4:]
        seed = next(s for r, s in _runs(suite) if r == run)
        return f"{wf.run_dir(PARAMS, suite, run, seed)}/model", _model_of(suite, run, seed), f"{run} seed {seed}"
    return m, None, os.path.basename(os.path.normpath(m))


def _teachers(suite):
    """Teacher components: teacher_run x teacher_seeds; unset, the largest teacher set a DistillCSE run
    of the suite distils from, else the seeds of "simcse" (or the first run)."""
    names = [r for r, _ in _runs(suite)]
    distill = sorted((wf.teacher_jobs(PARAMS, suite, r, s) for r, s in _runs(suite)), key=len)
    run = ASET["teacher_run"] or (distill[-1][0][0] if distill and distill[-1] else ("simcse" if "simcse" in names else names[0]))
    seeds = ASET["teacher_seeds"]
    if not seeds:
        seeds = sorted({s for t in distill for r, s in t if r == run}) or [s for r, s in _runs(suite) if r == run]
    return [(run, int(s)) for s in seeds]


def analysis_targets(suite):
    out = []
    a = _analyses()
    for name in ("align_uniform", "cosine_dist", "layers"):
        if name in a:
            out.append(f"{RESULTS}/{suite}/figures/{name}.png")
    for name in ("topk_negatives", "teacher_logits"):
        if name in a:
            out += [f"{RESULTS}/{suite}/analysis/{name}.json", f"{RESULTS}/{suite}/figures/{name}.png"]
    if "embed_dim" in a:
        out.append(f"{RESULTS}/{suite}/tables/embed_dim.md")
    if "neighbours" in a:
        out.append(f"{RESULTS}/{suite}/tables/neighbours.md")
    return out


def _per_model(name, ext="json"):  # evaluated runs only: a training-only run (`evaluate: false`) has no embeddings
    return lambda w: [f"{RESULTS}/{w.suite}/analysis/{run}/seed{seed}/{name}.{ext}" for run, seed in wf.evaluated_jobs(PARAMS, w.suite)]


# served by the run's embeddings table (the CLI's list, in rule spelling)
TABLE_ANALYSES = tuple(a.replace("-", "_") for a in _analysis_cli.TABLE_ANALYSES)


# Per-run analyses run once per run, in its evaluation folder, labelled by the run's key (each suite's
# view relabels them with its own run name)
ANALYSIS_LABEL = "'{wildcards.key} s{wildcards.seed}'"


rule analysis_model:
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        embeddings=lambda w: embeddings_of(w) if w.analysis in TABLE_ANALYSES else [],
    output:
        f"{EVAL}/analysis/{{analysis}}.json",
    wildcard_constraints:
        analysis="align_uniform|cosine_dist|layers|embed_dim",
    params:
        cfg=PARAMS_ARGS,
        name=lambda w: w.analysis.replace("_", "-"),
        extra=lambda w: {"embed_dim": "--dims {} --methods {} {}".format(" ".join(map(str, ASET["embed_dims"])), " ".join(ASET["embed_methods"]), sts_cap(w))}.get(w.analysis, f"--split {ASET['split']}"),
        embeddings=lambda w, input: f"--embeddings {input.embeddings}" if input.embeddings else "",
    threads: lambda w: 1 if w.analysis in TABLE_ANALYSES else config.get("threads", workflow.cores)
    log:
        f"{EVAL}/logs/analysis.{{analysis}}.log",
    shell:
        "csebench --threads {threads} analyze {params.name} {params.cfg} --model $(dirname {input.summary})/model"
        " --senteval $(dirname {input.senteval}) --label " + ANALYSIS_LABEL + " {params.extra} {params.embeddings}"
        " --out {output} 2> {log}"


rule analysis_neighbours:
    input:
        summary=f"{RUN}/train.json",
        corpus=corpus_of,
    output:
        json=f"{EVAL}/analysis/neighbours.json",
        md=f"{EVAL}/analysis/neighbours.md",
    params:
        cfg=PARAMS_ARGS,
        extra=f"--buffer-size {ASET['buffer_size']} --k {ASET['neighbours_k']} --n-queries {ASET['neighbour_queries']}",
    threads: config.get("threads", workflow.cores)
    log:
        f"{EVAL}/logs/analysis.neighbours.log",
    shell:
        "csebench --threads {threads} analyze neighbours {params.cfg} --model $(dirname {input.summary})/model --corpus {input.corpus}"
        " --label " + ANALYSIS_LABEL + " {params.extra} --out {output.json} --markdown {output.md} 2> {log}"


rule analysis_suite_figure:
    input:
        jsons=lambda w: _per_model(w.fig)(w),
        sts=lambda w: run_dirs(w.suite, "sts.json", evaluated=True) if w.fig == "align_uniform" else [],
    output:
        f"{RESULTS}/{{suite}}/figures/{{fig}}.png",
    wildcard_constraints:
        fig="align_uniform|cosine_dist|layers",
    params:
        kind=lambda w: w.fig.replace("_", "-"),
        sts=lambda w, input: ("--sts " + " ".join(input.sts)) if input.sts else "",
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.figure.{{fig}}.log",
    shell:
        "csebench analyze-figure {params.kind} --inputs {input.jsons} {params.sts} --out {output} 2> {log}"


rule analysis_embed_dim_table:
    input:
        _per_model("embed_dim"),
    output:
        md=f"{RESULTS}/{{suite}}/tables/embed_dim.md",
        csv=f"{RESULTS}/{{suite}}/tables/embed_dim.csv",
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.embed_dim_table.log",
    shell:
        "csebench analyze-figure embed-dim --inputs {input} --out {output.md} --csv {output.csv} 2> {log}"


rule analysis_neighbours_table:
    input:
        _per_model("neighbours", "md"),
    output:
        f"{RESULTS}/{{suite}}/tables/neighbours.md",
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.neighbours_table.log",
    shell:
        "csebench analyze-figure neighbours --inputs {input} --out {output} 2> {log}"


rule analysis_topk_negatives:
    input:
        model=lambda w: [m for m in [_topk_model(w.suite)[1]] if m],
        corpus=corpus_of,
    output:
        json=f"{RESULTS}/{{suite}}/analysis/topk_negatives.json",
        png=f"{RESULTS}/{{suite}}/figures/topk_negatives.png",
    params:
        cfg=PARAMS_ARGS,
        model=lambda w: _topk_model(w.suite)[0],
        label=lambda w: _topk_model(w.suite)[2],
        extra="--batch-sizes {} --repeats {} --pool-size {}".format(" ".join(map(str, ASET["topk_batch_sizes"])), ASET["topk_repeats"], ASET["topk_pool_size"]),
    threads: config.get("threads", workflow.cores)
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.topk_negatives.log",
    shell:
        "csebench --threads {threads} analyze topk-negatives {params.cfg} --model {params.model} --corpus {input.corpus} --label '{params.label}'"
        " {params.extra} --out {output.json} --figure {output.png} 2> {log}"


rule analysis_teacher_logits:
    input:
        teachers=lambda w: [_model_of(w.suite, r, s) for r, s in _teachers(w.suite)],
        corpus=corpus_of,
        senteval=senteval_of,
    output:
        json=f"{RESULTS}/{{suite}}/analysis/teacher_logits.json",
        png=f"{RESULTS}/{{suite}}/figures/teacher_logits.png",
    params:
        cfg=PARAMS_ARGS,
        teachers=lambda w, input: " ".join(f"--teacher {os.path.dirname(t)}/model" for t in input.teachers),
        extra=f"--logit-batch-size {ASET['logit_batch_size']} --n-batches {ASET['logit_batches']}",
    threads: config.get("threads", workflow.cores)
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.teacher_logits.log",
    shell:
        "csebench --threads {threads} analyze teacher-logits {params.cfg} {params.teachers} --corpus {input.corpus}"
        " --senteval $(dirname {input.senteval}) {params.extra} --out {output.json} --figure {output.png} 2> {log}"


# ---- analyses the paper tables ask for by path (csebench.results): built when an item needs them

rule analysis_token_matrix:  # SSCL Fig. 5: the model's last-layer token cosine matrix of one STS-B test sentence
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
    output:
        f"{EVAL}/analysis/token_matrix.json",
    params:
        cfg=PARAMS_ARGS,
    threads: 1
    log:
        f"{EVAL}/logs/analysis.token_matrix.log",
    shell:
        "csebench --threads {threads} analyze token-matrix {params.cfg} --models $(dirname {input.summary})/model --labels '{wildcards.key}'"
        " --senteval $(dirname {input.senteval}) --label " + ANALYSIS_LABEL + " --out {output} 2> {log}"


def _teacher_models(w):  # a student's teachers are part of the run (their keys are in its own)
    suite, run = first_listed(w)
    return [f"{wf.run_folder(PARAMS, suite, t, s)}/train.json" for t, s in wf.teacher_jobs(PARAMS, suite, run, int(w.seed))]


rule analysis_distill_loss:  # DistillCSE Table 9: the student's distillation loss on training and test sentences
    input:
        summary=f"{RUN}/train.json",
        teachers=_teacher_models,
        corpus=corpus_of,
        senteval=senteval_of,
    output:
        f"{EVAL}/analysis/distill_loss.json",
    params:
        cfg=PARAMS_ARGS,
        teachers=lambda w, input: " ".join(f"--teacher {os.path.dirname(t)}/model" for t in input.teachers),
    threads: config.get("threads", workflow.cores)
    resources:
        gpu=1,
    log:
        f"{EVAL}/logs/analysis.distill_loss.log",
    shell:
        "csebench --threads {threads} analyze distill-loss {params.cfg} --model $(dirname {input.summary})/model {params.teachers}"
        " --corpus {input.corpus} --senteval $(dirname {input.senteval}) --label " + ANALYSIS_LABEL + " --out {output} 2> {log}"


rule analysis_ensemble_sts:  # DistillCSE Table 5: STS of the mean normalised embedding of all seeds of a run
    input:
        embeddings=lambda w: [f"{RUNS.eval_folder(w.suite, w.run, s)}/embeddings.npz" for r, s in wf.evaluated_jobs(PARAMS, w.suite) if r == w.run],
        senteval=senteval_of,
    output:
        f"{RESULTS}/{{suite}}/analysis/{{run}}/ensemble_sts.json",
    params:
        cfg=PARAMS_ARGS,
    threads: 1
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.ensemble_sts.{{run}}.log",
    shell:
        "csebench --threads {threads} analyze ensemble-sts {params.cfg} --embeddings {input.embeddings} --senteval $(dirname {input.senteval})"
        " --label '{wildcards.run} ensemble' --out {output} 2> {log}"


def _correlation_models(w):
    groups = wf.correlation_groups(PARAMS, w.suite, w.run, int(w.seed))
    return {g: [_model_of(w.suite, r, s) for r, s in jobs] for g, jobs in groups.items()}


rule analysis_model_correlation:  # DistillCSE Table 8: a student against its teacher, other teachers, other students (of its suite)
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        self_teacher=lambda w: _correlation_models(w)["self_teacher"],
        other_teachers=lambda w: _correlation_models(w)["other_teachers"],
        other_students=lambda w: _correlation_models(w)["other_students"],
        senteval=senteval_of,
    output:
        f"{RESULTS}/{{suite}}/analysis/{{run}}/seed{{seed}}/model_correlation.json",
    params:
        cfg=PARAMS_ARGS,
        groups=lambda w, input: " ".join(
            f"--{flag} " + " ".join(f"{os.path.dirname(t)}/model" for t in files)
            for flag, files in (("self-teacher", input.self_teacher), ("other-teachers", input.other_teachers),
                                ("other-students", input.other_students)) if files),
    threads: config.get("threads", workflow.cores)
    resources:
        gpu=1,
    log:
        f"{RESULTS}/{{suite}}/logs/analysis.model_correlation.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} analyze model-correlation {params.cfg} --model $(dirname {input.summary})/model {params.groups}"
        " --senteval $(dirname {input.senteval}) --out {output} 2> {log}"
