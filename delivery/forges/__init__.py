"""Forges: where the folders' repositories and pull requests live (SPEC §7.1).

`base.Forge` is the protocol every forge implements (GitHub through the REST API and the
probe's GraphQL query; the offline local forge from records beside bare repositories)."""
