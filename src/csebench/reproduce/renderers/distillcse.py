"""DistillCSE renderers beyond the generic ones (none yet: its tables are grids over runs and
analysis values, its figures curves and the teacher-logit analysis)."""
