"""A run kept on a git ref (SPEC §13, the Action's event mode): `remote.StateRunStore`, the
run store's second implementation, and the claims that let one job at a time run it. A
layer of its own below the engine: it reaches git through `delivery.git` and GitHub only
through the probes' client (`claims.ActionsRuns`)."""
