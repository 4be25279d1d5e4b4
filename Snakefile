# csebench DAG. Hyperparameters come from params.yaml only; config/*.yaml choose the suites.
#   snakemake --cores all --resources gpu=1                       # every table and figure of the papers (GPU + hub)
#   snakemake --cores all --configfile config/demo.yaml           # offline CPU demo
#   snakemake -n --config 'suites=[ablation-iscse-k]'             # any suite
# Rules only call the csebench CLI; the logic lives in the package (csebench.study.jobs, csebench.results).
# A run listed by several suites is trained and evaluated once, in results/runs/<key>/seed<N>; each suite's
# results/<suite>/runs/<run>/seed<N> is a view of it (docs/runs.md).
# `suites: all` (config/paper.yaml) = SimCSE's main suite and every suite the reproduction registry reads.

import sys

from csebench.core.paths import key_dir
from csebench.core.schema import schema_path
from csebench.study.jobs import (Runs, all_runs_with_teachers, check_suites, dev_set_file, evaluated_jobs, sts_sets,
                                 suite_data, suite_evaluation, suite_jobs, suite_mteb_tasks, teacher_cache, teacher_jobs,
                                 teacher_representation, trains)
from csebench.study.params import run_dir
from csebench.study.typed import Params
from csebench.workflow.steps import (check_plugins, check_snakemake_config, find_cli, finished_run_inputs,
                                     hub_generators, lock_error_in_one_line, merge_default_config,
                                     offline_if_submitted, one_line, option_args, params_args, record_times,
                                     refuse_locked_build, refuse_outside_links, restore_times, start_warm,
                                     stop_warm, sts_pairs_argv, trains_from_hub)
from csebench.results.registry import default_suites

merge_default_config(config, "config/paper.yaml")  # the papers' build, under --configfile and --config

include: "workflow/rules/common.smk"  # first: checks the config against its schema

with one_line():  # a mistake in params.yaml or an override: its one line, without Snakemake's stack lines
    check_plugins()  # an installed package's term, analysis or renderer named like another
    PARAMS = Params.load(config.get("params", "params.yaml"), config.get("params_overrides", []))
    SUITES = config["suites"] if isinstance(config["suites"], list) else [config["suites"]]
    if SUITES == ["all"]:
        SUITES = default_suites(PARAMS)
    check_suites(PARAMS, SUITES)
    DEPLOYED = any(getattr(m, "name", str(m)).lower() in ("conda", "apptainer")
                   for m in (workflow.deployment_settings.deployment_method or ()))  # the rules' own software
    find_cli(uses_conda=DEPLOYED)
PARAMS_ARGS = params_args(config)  # every rule's command reads the params the DAG was planned with
RESULTS = PARAMS.get("paths", {}).get("results", "results")
DATA = PARAMS.get("paths", {}).get("data", "data")
PROGRESS = [] if config.get("progress", True) else ["--no-progress"]
# Every run of params.yaml by identity (docs/runs.md): a run listed by several suites is trained,
# embedded and evaluated once, in its own folder; the suites' folders are views of it (views.smk).
with one_line():
    RUNS = Runs(PARAMS)
    if workflow.is_main_process:  # (a cluster job's Snakemake plans its one job: the build checked them all)
        RUNS.check()  # every run resolved before planning: a setting no run can train with is its one line

offline_if_submitted(workflow.is_main_process)  # a cluster job downloads nothing (csebench.study.fetch)
if workflow.is_main_process:  # another build holding the lock: one line (rule all checks before planning)
    lock_error_in_one_line(workflow)

if workflow.is_main_process:
    with one_line():  # a planted link out of the repository: refused before a dvc.yaml stage commits it (docs/dvc.md),
        refuse_outside_links(RESULTS, SUITES, data=DATA)  # and before a prepare job writes through one in data/
    if restore_times(RESULTS, RUNS):  # results a DVC checkout or a copy wrote anew count as built (docs/dvc.md)
        record_times(RESULTS)  # (neither while another Snakemake run holds a lock here: it builds these trees)

WARM = []  # a local build's warm server (csebench.workflow.warm): its jobs fork from one Python with torch imported

onsuccess:
    stop_warm(WARM)
    with one_line():
        refuse_outside_links(RESULTS, SUITES, data=DATA)
    record_times(RESULTS)

onerror:  # what did finish is recorded too
    stop_warm(WARM)
    record_times(RESULTS)

RUN = key_dir(RESULTS, "{key}", "{seed}")  # a run's folder: training, its teacher cache
EVAL = f"{RUN}/{{ev}}"  # the run evaluated under one suite's evaluation settings (csebench.study.jobs.eval_name)

onstart:  # what this build will cost, when it runs jobs (not for -n, --lint, --touch, ...)
    if config.get("plan", True) and not workflow.touch:
        from csebench.results.plan import print_plan

        print_plan(PARAMS, SUITES)
    if config.get("warm_start", True) and workflow.local_exec and not workflow.touch and not DEPLOYED:
        WARM.append(start_warm([job.rule.name for job in workflow.dag.needrun_jobs()]))

include: "workflow/rules/inputs.smk"  # the rules' input functions and targets
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/teachers.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/sts.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/card.smk"  # after transfer.smk
include: "workflow/rules/metrics.smk"  # after transfer.smk: DVC's metrics (docs/dvc.md)
include: "workflow/rules/probing.smk"
include: "workflow/rules/mteb.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/results.smk"
include: "workflow/rules/views.smk"  # each suite's folders of its runs, which are trained once (docs/runs.md)


ALL = [
    *[f"{RESULTS}/{suite}/tables/sts.md" for suite in SUITES],
    *[f"{RESULTS}/{suite}/metrics.json" for suite in SUITES],  # DVC's metrics (metrics.smk)
    *[c for suite in dict.fromkeys([*SUITES, *reproduce_suites()]) for c in card_targets(suite)],  # a model card in every run's model/ (card.smk)
    *[t for suite in SUITES for t in analysis_targets(suite)],  # config `analyses:` (workflow/rules/analysis.smk)
    *[t for suite in SUITES for t in mteb_targets(suite)],  # a suite's `mteb:` (workflow/rules/mteb.smk)
    *reproduce_targets(),  # config `reproduce:` (workflow/rules/results.smk)
    *([f"{RESULTS}/README.md"] if config.get("front_page", True) else []),  # false: DVC's suite stages (docs/dvc.md)
]


rule all:
    input:
        ALL,
        # no file: the first step of planning, once Snakemake's settings are known; another build making these
        # targets stops this one now, in one line, not after the whole DAG is planned (csebench.study.jobs)
        lambda w: refuse_locked_build(workflow, ALL),
