# The papers' analyses (docs/analyses.md), one file each in src/csebench/analysis/analyses/. Every rule here is
# generated from their declarations (csebench.analysis.pipeline): adding an analysis touches no rule file.
# Which ones a suite builds: `analyses:` in the Snakemake config (config/demo.yaml, config/ci.yaml); their
# settings: `analysis: {NAME: {...}}` there (defaults: `csebench analyze NAME --help`).
#   analysis_NAME        one analysis: of a run (computed once in its evaluation folder,
#                        results/runs/{key}/seed{seed}/{ev}/analysis/NAME.json, whichever suites list it; views.smk
#                        shows it in results/{suite}/analysis/{run}/seed{seed}/), of every seed of a run
#                        (results/{suite}/analysis/{run}/NAME.json) or of the suite (results/{suite}/analysis/NAME.json,
#                        figures/NAME.png); those no `analyses:` lists are built when a paper item reads them
#   analysis_NAME_suite  a suite's figure or table of every run's result (figures/NAME.png or tables/NAME.md)

from csebench.analysis.pipeline import AnalysisPipeline

with one_line():  # a mistake in `analyses:` or `analysis:`: its one line
    ANALYSES = AnalysisPipeline(PARAMS, config, RUNS)
analysis_targets = ANALYSES.targets  # a suite's files: the Snakefile's rule all, the links of the suite's README

for _analysis in ANALYSES.built():

    rule:
        name:
            f"analysis_{_analysis.name}"
        input:
            unpack(ANALYSES.inputs(_analysis)),
        output:
            **ANALYSES.outputs(_analysis),
        params:
            args=ANALYSES.command(_analysis),
            cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        threads: ANALYSES.threads(_analysis, config.get("threads", workflow.cores))
        priority: ANALYSES.priority(_analysis)
        resources:
            **ANALYSES.resources(_analysis),
        log:
            ANALYSES.log(_analysis),
        conda:
            "../envs/csebench.yaml"
        shell:
            "csebench --threads {threads} analyze {params.args:q} {params.cfg:q} 2> {log:q}"


for _analysis in ANALYSES.combined():

    rule:
        name:
            f"analysis_{_analysis.name}_suite"
        input:
            unpack(ANALYSES.combine_inputs(_analysis)),
        output:
            **ANALYSES.combine_outputs(_analysis),
        params:
            args=ANALYSES.combine_command(_analysis),
        log:
            ANALYSES.combine_log(_analysis),
        conda:
            "../envs/csebench.yaml"
        shell:
            "csebench analyze-figure {params.args:q} 2> {log:q}"
