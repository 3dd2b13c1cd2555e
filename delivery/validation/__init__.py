"""Checks that run before the first stage: every rule of SPEC §10."""
