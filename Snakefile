# csebench DAG. Hyperparameters come from params.yaml only; config/*.yaml choose the suites.
#   snakemake --cores all --resources gpu=1                       # paper suites (GPU + hub)
#   snakemake --cores all --configfile config/demo.yaml           # offline CPU demo
#   snakemake -n --config 'suites=[ablation-iscse-k]'             # any suite
# Rules only call the csebench CLI; the logic lives in the package (csebench.workflow).

from csebench import workflow as wf

configfile: "config/paper.yaml"

PARAMS = wf.load_params(config.get("params", "params.yaml"), config.get("params_overrides", []))
SUITES = config["suites"] if isinstance(config["suites"], list) else [config["suites"]]
RESULTS = PARAMS.get("paths", {}).get("results", "results")
DATA = PARAMS.get("paths", {}).get("data", "data")
PROGRESS = "" if config.get("progress", True) else "--no-progress"

include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/teachers.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/sts.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/probing.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/analysis.smk"


rule all:
    input:
        [f"{RESULTS}/{suite}/tables/sts.md" for suite in SUITES],
        [t for suite in SUITES for t in analysis_targets(suite)],  # config `analyses:` (workflow/rules/analysis.smk)
