"""`csebench fetch-backbone`, `fetch-generator`, `show-config`, `runs`: what params.yaml names, fetched and resolved;
and the helpers every command uses to read params.yaml and name a run from its options.
"""

from __future__ import annotations

import logging
import os

from csebench.core.commands import OUT, PARAMS, RUN, Commands, option
from csebench.core.errors import ConfigError
from csebench.study.jobs import suite_jobs
from csebench.study.typed import Params

COMMANDS = Commands(stage=10)


def params_of(args) -> Params:
    """params.yaml (--params) with its --config overrides, loaded and checked once. Without --params, outside a folder
    holding a params.yaml (a folder of your own outside the checkout), the params.yaml the Python API reads: the
    checkout's csebench is installed from, else the copy a wheel carries (csebench.study.params.installed_checkout);
    its relative paths.shared is then read beside that file (../shared beside the checkout), as the API reads it."""
    path = args.params
    if path == DEFAULT_PARAMS and not os.path.isfile(path):
        found, origin = installed_params()
        if found is not None:
            if found not in _SAID:  # once a process: a command reads params more than once
                _SAID.add(found)
                logging.getLogger("csebench").info("no params.yaml here: reading %s (%s)", found, origin)
            return Params.load(found, args.config).with_shared_beside_file()
    return Params.load(path, args.config)


DEFAULT_PARAMS = "params.yaml"  # --params' default (csebench.core.commands.PARAMS)
_SAID: set = set()  # the installed params.yaml files this process has named


def installed_params():
    """(the params.yaml of the checkout csebench is installed from, else the one a wheel of csebench carries, or None;
    which of them it is)."""
    from csebench.study.params import installed_checkout, packaged_params_file

    checkout = installed_checkout()
    if checkout is not None:
        return checkout / "params.yaml", "the checkout csebench is installed from"
    return packaged_params_file(), "the copy this installed csebench carries"


def resolve_inputs(args) -> None:
    """What params.yaml names, for the commands that take a model or SentEval data: ``--model NAME`` with a
    backbone name of params.yaml is that backbone's model (``minilm`` is ``packaged:minilm``), and without
    ``--senteval`` the SentEval data are the shared ones (paths.shared/senteval, $CSEBENCH_SHARED)."""
    from csebench.study.params import may_name_backbone, named_backbone_model, shared_senteval

    model = getattr(args, "model", None)
    named = isinstance(model, str) and hasattr(args, "params") and may_name_backbone(model)
    need_data = hasattr(args, "senteval") and args.senteval is None
    if not (named or need_data):
        return
    params = params_of(args)
    backbone = named_backbone_model(params, model) if named else None
    if named and backbone is None:  # a bare word that names no backbone: a misspelt one is said before any loading
        params.check_model_name(model, "--model")
    if backbone is not None:
        logging.getLogger("csebench").info("--model %s: the backbone %s of params.yaml, %s", model, model, backbone)
        args.model = backbone
    if need_data:
        args.senteval = shared_senteval(params, "no --senteval given and", "pass --senteval")


@COMMANDS.command("fetch-backbone", "download a backbone's model and tokenizer into the Hugging Face cache (the submitting "
                  "host's step before cluster jobs: docs/cluster.md)", PARAMS,
                  option("--backbone", required=True, help="backbone name in params.yaml"),
                  OUT.but(help="the note of what was fetched and its hub commits, e.g. data/backbones/NAME.json"))
def cmd_fetch_backbone(args) -> None:
    from csebench.study.fetch import fetch_backbone
    from csebench.core.io import write_json

    write_json(args.out, fetch_backbone(params_of(args), args.backbone))


@COMMANDS.command("fetch-generator", "download a term's second pretrained model (DiffCSE's masked-LM generator) into the "
                  "Hugging Face cache (the submitting host's step before cluster jobs: docs/cluster.md)",
                  option("--model", required=True, help="its hub id (ORG/NAME may be written ORG--NAME)"),
                  OUT.but(help="the note of what was fetched and its hub commit, e.g. data/generators/NAME.json"))
def cmd_fetch_generator(args) -> None:
    from csebench.study.fetch import fetch_generator
    from csebench.core.io import write_json

    write_json(args.out, fetch_generator(args.model))


def name_run(args, params: dict) -> None:
    """--key KEY (a run's folder under results/runs, what Snakemake passes) stands for the first suite
    and run of params.yaml that list it at --seed (docs/runs.md); else --suite and --run name it."""
    if getattr(args, "key", None):
        if args.suite or args.run:
            raise ConfigError("give either --key or --suite and --run, not both")
        from csebench.study.jobs import runs_of

        args.suite, args.run = runs_of(params).first(args.key, args.seed)
    elif not (args.suite and args.run):
        raise ConfigError("name the run: --suite SUITE --run RUN (or --key KEY, its folder under results/runs)")


@COMMANDS.command("show-config", "print a run's resolved configuration, key and fingerprint", PARAMS, RUN, writes=False)
def cmd_show_config(args) -> None:
    from csebench.study.resolve import resolve_run
    from csebench.core.io import dumps_json

    params = params_of(args)
    name_run(args, params)
    print(dumps_json(resolve_run(params, args.suite, args.run, args.seed).record(), default=str))


@COMMANDS.command("runs", "each suite's runs, the folder each is trained in, and which are shared", PARAMS,
                  option("--suites", nargs="+", help="default: every suite of params.yaml"), writes=False)
def cmd_runs(args) -> None:
    from csebench.study.jobs import runs_of

    params = params_of(args)
    runs = runs_of(params)
    listed = [(suite, run, seed) for suite in args.suites or list((params.get("suites") or {})) for run, seed in suite_jobs(params, suite)]
    for suite, run, seed in listed:
        same = runs.same_run_as(suite, run, seed)
        print(f"{suite + '/' + run + ' seed ' + str(seed):<60} {runs.folder(suite, run, seed)}" + (f"  same run as {same}" if same else ""))
    distinct = {runs.folder(*job) for job in listed}
    print(f"{len(listed)} runs listed, {len(distinct)} distinct (each trained once; docs/runs.md)")
