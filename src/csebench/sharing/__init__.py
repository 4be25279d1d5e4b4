"""Sharing."""
