# The config check, shared wildcard constraints and input functions (thin wrappers over csebench.workflow).

from snakemake.utils import validate

# The config against the JSON Schema csebench ships (resources/snakemake-config.schema.yaml): csebench's
# check first, for keys given twice and for one line naming the wrong key; then Snakemake's validate().
# params.yaml and its overrides are checked against params.schema.yaml when the Snakefile loads them.
wf.check_snakemake_config(config, workflow.configfiles)
validate(config, wf.schema_path("snakemake-config"))

wildcard_constraints:
    suite=r"[A-Za-z0-9_.+-]+",
    run=r"[A-Za-z0-9_.+-]+",
    seed=r"\d+",
    data=r"[A-Za-z0-9_.+-]+",


def corpus_of(w):
    return f"{DATA}/{wf.suite_data(PARAMS, w.suite)}/corpus.txt"


def senteval_of(w):
    return f"{DATA}/{wf.suite_data(PARAMS, w.suite)}/senteval/ROOT"


def run_dirs(suite, name="train.json", evaluated=False):
    """NAME in every run folder of the suite; evaluated=True: only runs that are evaluated (not `evaluate: false`)."""
    runs = wf.evaluated_jobs(PARAMS, suite) if evaluated else wf.jobs(PARAMS, suite)
    return [f"{wf.run_dir(PARAMS, suite, run, seed)}/{name}" for run, seed in runs]
