"""The closed sets of values that params.yaml and the command-line options take (poolers, precisions,
projection heads, the dev metric) and the default MTEB tasks: one place, read by the study, the model,
the evaluation and the commands alike.
"""

from __future__ import annotations


POOLERS = ("cls", "cls_before_pooler", "avg", "avg_first_last", "avg_top2")
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "fast")  # training autocast: trainer.autocast_dtype
# encoding for evaluation: encoder.eval_autocast_dtype and encoder.eval_int8 (int8: on a CPU, the Linear layers
# dynamically quantized; asked for by name only, a screening precision)
EVAL_PRECISIONS = ("auto", "fp32", "bf16", "fast", "int8")
PROJECTION_HEADS = ("linear", "linear_tanh", "batchnorm")  # training.projection_head (SSCL Table 5: paper, released code; DiffCSE's BatchNorm MLP)
# training.dev_metric: what selects the checkpoint. stsb: STS-B dev Spearman (SimCSE's metric_for_best_model
# stsb_spearman); avg_sts: the mean of STS-B dev and SICK-R dev (SimCSE's trainer's eval_avg_sts, which DCLR's
# run.sh selects on: --metric_for_best_model avg_sts)
DEV_METRICS = ("stsb", "avg_sts")

# MTEB's task names (mteb_eval.py): the STS tasks of MTEB(eng, v2) with STS16 (STS17: its en-en subset,
# STS22.v2: en, test splits only), and the default list `csebench eval-mteb` and a suite's `mteb: {}` run
MTEB_STS_TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R", "BIOSSES", "STS17", "STS22.v2"]
MTEB_DEFAULT_TASKS = MTEB_STS_TASKS + ["Banking77Classification", "AmazonCounterfactualClassification", "ArguAna", "SciFact"]
# training.compile beyond true/false: a torch.compile mode (reduce-overhead: CUDA graphs of each static shape too)
COMPILE_MODES = ("reduce-overhead",)
