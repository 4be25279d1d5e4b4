# The config check, shared wildcard constraints and input functions (thin wrappers over csebench.study.jobs).

from snakemake.utils import validate

# The config against the JSON Schema csebench ships (resources/snakemake-config.schema.yaml): csebench's
# check first, for keys given twice and for one line naming the wrong key; then Snakemake's validate().
# params.yaml and its overrides are checked against params.schema.yaml when the Snakefile loads them.
with one_line():  # a mistake: its one line, without Snakemake's stack lines
    check_snakemake_config(config, workflow.configfiles)
validate(config, schema_path("snakemake-config"))

# Every rule's software for `--software-deployment-method conda` (docs/cluster.md); paths are relative
# to the rule files' folder.
CONDA_ENV = "../envs/csebench.yaml"

wildcard_constraints:
    suite=r"[A-Za-z0-9_.+-]+",
    run=r"[A-Za-z0-9_.+-]+",
    seed=r"\d+",
    data=r"[A-Za-z0-9_.+-]+",
    key=r"[0-9a-f]{16}",
    ev=r"eval-[A-Za-z0-9-]+",


def first_listed(w):
    """(suite, run) naming the run of a {key} job: the first of params.yaml that lists it."""
    return RUNS.first(w.key, int(w.seed))


def suite_of(w):  # a suite's job: its suite; a run's job: the suite that names it (same data source)
    return w.suite if hasattr(w, "suite") else first_listed(w)[0]


def corpus_of(w):
    return f"{DATA}/{suite_data(PARAMS, suite_of(w))}/corpus.txt"


def senteval_of(w):
    return f"{DATA}/{suite_data(PARAMS, suite_of(w))}/senteval/ROOT"


def run_dirs(suite, name="train.json", evaluated=False):
    """NAME in every run folder of the suite; evaluated=True: only runs that are evaluated (not `evaluate: false`)."""
    runs = evaluated_jobs(PARAMS, suite) if evaluated else suite_jobs(PARAMS, suite)
    return [f"{run_dir(PARAMS, suite, run, seed)}/{name}" for run, seed in runs]
