"""The GitHub Action (SPEC §13, §14): `action.yml`'s step runs `python -m delivery.action`.

It reads the step's inputs and the event (`GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`),
decides what to do (`events.plan`), starts or resumes runs in event mode with their state on
the state repository's refs, and reports through `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY` and
workflow commands (`::add-mask::`, `::error file=…,line=…::`).
"""
