"""Prompt templates shipped with delivery (a package so that every install finds them)."""
