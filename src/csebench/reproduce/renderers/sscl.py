"""SSCL renderers beyond the generic ones (none yet: its tables are grids, its figures sweeps,
curves and analysis figures)."""
