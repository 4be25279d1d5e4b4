"""The workflow."""
