"""Evaluation: STS (SentEval protocol, SimCSE's "all" setting) and SentEval transfer tasks.

The task lists live here, once: the evaluators (sts.py, transfer.py) score them and the tables
(csebench.results) print them, without importing torch."""

STS_TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]  # sts.json keys; the 7 of the average
TRANSFER_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]  # transfer.json keys; the 7 of the average
PRINTED = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R", "SST2": "SST"}  # as the papers head their columns
