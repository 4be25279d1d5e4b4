"""Evaluation: STS (SentEval protocol, SimCSE's "all" setting) and SentEval transfer tasks."""
