# Shared wildcard constraints and input functions (thin wrappers over csebench.workflow).

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
