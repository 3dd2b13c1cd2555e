# ruff: noqa: E501  -- the YAML is kept as the docs show it, long comments included
"""The workflow files `delivery action init` writes (SPEC §13 "Setting it up"), as the
docs show them (docs/workflows/, checked equal by tests/cli/test_action_init.py): the
example's action reference and control repository are replaced by the user's.
"""

from __future__ import annotations

from typing import Final

EXAMPLE_ACTION: Final = "your-org/delivery"
EXAMPLE_PIN: Final = "0123456789abcdef0123456789abcdef01234567"
EXAMPLE_CONTROL: Final = "octo/control"

CONTROL: Final = r'''# The control repository's workflow (`delivery action init` writes it to
# .github/workflows/delivery.yml): a labelled issue starts a delivery, a dispatch starts one
# by hand, the schedule is the safety net that resumes paused runs whose events were missed.
# The runs' state lives on this repository's refs/delivery/runs/*; its delivery.toml (agent
# profiles, checks) is found in the checkout, its .github/delivery-repos names the
# repositories. A stage that fans out ends the `deliver` job with the chunks to run: the
# `work` job starts once it has ended (no job waits), a matrix of fresh runners. When the
# worker that continues the run reaches another stage that fans out, `work-2` runs that
# one's chunks, and so on up to `work-4`; past it, the schedule resumes the run.
name: delivery

on:
  issues:
    types: [labeled]
  workflow_dispatch:
    inputs:
      ticket:
        description: The ticket to deliver (its URL)
        required: true
        type: string
  schedule:
    - cron: "17 * * * *"

# the default token only reads this checkout; everything else goes through the App token
permissions: {}

jobs:
  deliver:
    if: github.event_name != 'issues' || github.event.label.name == 'delivery'
    runs-on: ubuntu-latest
    timeout-minutes: 60
    permissions:
      contents: read
    concurrency:
      # one job per issue; a schedule tick is its own group (the claim on the ref makes
      # two jobs resuming one run safe: the loser exits `superseded`)
      group: delivery-${{ github.event.issue.number || github.run_id }}
      cancel-in-progress: false
    outputs:
      run-id: ${{ steps.delivery.outputs.run-id }}
      chunks: ${{ steps.delivery.outputs.chunks }}
    steps:
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8  # v5.0.0
        with:
          persist-credentials: false
      - name: The repositories the App token reaches (.github/delivery-repos)
        id: repos
        run: |
          # `F=owner/name` per line: the token is scoped to this repository and those names
          names=$(sed -n 's/^[^#=]*=[^/]*\/\([^[:space:]]*\).*/\1/p' .github/delivery-repos)
          echo "names=$(printf '%s\n' "${GITHUB_REPOSITORY#*/}" $names | paste -sd, -)" \
            >> "$GITHUB_OUTPUT"
      - name: App token, scoped to this delivery's repositories
        id: app-token
        uses: actions/create-github-app-token@67018539274d69449ef7c02e8e71183d1719ab42  # v2.1.4
        with:
          app-id: ${{ vars.DELIVERY_APP_ID }}
          private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
          owner: ${{ github.repository_owner }}
          repositories: ${{ steps.repos.outputs.names }}
          permission-contents: write
          permission-pull-requests: write
          permission-issues: write
          permission-checks: read
          permission-statuses: write  # the change set's commit status on each PR
          permission-actions: read  # is a claim's job still running? (a killed job's run is completed)
      - name: Deliver
        id: delivery
        uses: your-org/delivery@0123456789abcdef0123456789abcdef01234567  # the release you vetted
        env:
          ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}
        with:
          github-token: ${{ steps.app-token.outputs.token }}
          agent: claude  # the action installs Claude Code, once per job
          max-runners: 20
          inputs: |
            check_command=make test

  work:
    # the fan-out: one job per chunk of the stage's folders, each on a fresh runner
    needs: deliver
    if: needs.deliver.outputs.chunks != '' && needs.deliver.outputs.chunks != '[]'
    permissions:
      contents: read
    uses: ./.github/workflows/delivery-work.yml
    with:
      run-id: ${{ needs.deliver.outputs.run-id }}
      chunks: ${{ needs.deliver.outputs.chunks }}
    secrets:
      app-private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
      anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}

  # The next rounds, each over the chunks the round before left (its `join` job reads them
  # from the run's state ref): a fan-out its continuing worker reached (the next foreach
  # stage), or a chunk whose worker died. A round past work-4 is left to the schedule.
  work-2:
    needs: [deliver, work]
    if: ${{ !cancelled() && needs.work.outputs.chunks != '' && needs.work.outputs.chunks != '[]' }}
    permissions:
      contents: read
    uses: ./.github/workflows/delivery-work.yml
    with:
      run-id: ${{ needs.deliver.outputs.run-id }}
      chunks: ${{ needs.work.outputs.chunks }}
    secrets:
      app-private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
      anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}

  work-3:
    needs: [deliver, work-2]
    if: ${{ !cancelled() && needs.work-2.outputs.chunks != '' && needs.work-2.outputs.chunks != '[]' }}
    permissions:
      contents: read
    uses: ./.github/workflows/delivery-work.yml
    with:
      run-id: ${{ needs.deliver.outputs.run-id }}
      chunks: ${{ needs.work-2.outputs.chunks }}
    secrets:
      app-private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
      anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}

  work-4:
    needs: [deliver, work-3]
    if: ${{ !cancelled() && needs.work-3.outputs.chunks != '' && needs.work-3.outputs.chunks != '[]' }}
    permissions:
      contents: read
    uses: ./.github/workflows/delivery-work.yml
    with:
      run-id: ${{ needs.deliver.outputs.run-id }}
      chunks: ${{ needs.work-3.outputs.chunks }}
    secrets:
      app-private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
      anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}
'''

WORKER: Final = r'''# The control repository's worker workflow (`delivery action init` writes it to
# .github/workflows/delivery-work.yml), called by the `work` job of delivery.yml once the
# job that fanned out has ended: a matrix of jobs, one per chunk, each claiming its chunk,
# running the stage for its folders and saving each result on the run's state ref. The job
# that saves the last missing result continues the run. Then `join` reads the run's state
# ref: the chunks of a fan-out the run waits at (the next foreach stage the continuing
# worker reached, or a chunk whose worker died) are this workflow's `chunks` output, for
# the caller's next round.
name: delivery work

on:
  workflow_call:
    inputs:
      run-id:
        description: The run that fanned out
        required: true
        type: string
      chunks:
        description: The chunk numbers, a JSON list
        required: true
        type: string
    secrets:
      app-private-key:
        required: true
      anthropic-api-key:
        required: false
    outputs:
      chunks:
        description: The chunks left for the next round of workers, a JSON list ([] for none)
        value: ${{ jobs.join.outputs.chunks }}

permissions: {}

jobs:
  chunk:
    runs-on: ubuntu-latest
    timeout-minutes: 60
    permissions:
      contents: read
    strategy:
      fail-fast: false  # a failed chunk leaves its claim to go stale; the others go on
      matrix:
        chunk: ${{ fromJSON(inputs.chunks) }}
    steps:
      - uses: actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8  # v5.0.0
        with:
          persist-credentials: false
      - name: The repositories the App token reaches (.github/delivery-repos)
        id: repos
        run: |
          # `F=owner/name` per line: the token is scoped to this repository and those names
          names=$(sed -n 's/^[^#=]*=[^/]*\/\([^[:space:]]*\).*/\1/p' .github/delivery-repos)
          echo "names=$(printf '%s\n' "${GITHUB_REPOSITORY#*/}" $names | paste -sd, -)" \
            >> "$GITHUB_OUTPUT"
      - name: App token, scoped to this delivery's repositories
        id: app-token
        uses: actions/create-github-app-token@67018539274d69449ef7c02e8e71183d1719ab42  # v2.1.4
        with:
          app-id: ${{ vars.DELIVERY_APP_ID }}
          private-key: ${{ secrets.app-private-key }}
          owner: ${{ github.repository_owner }}
          repositories: ${{ steps.repos.outputs.names }}
          permission-contents: write
          permission-pull-requests: write
          permission-issues: write
          permission-checks: read
          permission-statuses: write  # the change set's commit status on each PR
          permission-actions: read  # is a claim's job still running? (a killed job's run is completed)
      - name: Run one chunk
        id: delivery
        uses: your-org/delivery@0123456789abcdef0123456789abcdef01234567  # the release you vetted
        env:
          ANTHROPIC_API_KEY: ${{ secrets.anthropic-api-key }}
        with:
          github-token: ${{ steps.app-token.outputs.token }}
          agent: claude  # the action installs Claude Code, once per job
          mode: work
          run-id: ${{ inputs.run-id }}
          chunk: ${{ matrix.chunk }}

  join:
    # after every chunk's job (a matrix's job outputs are whichever leg wrote last, so the
    # continuing worker's own `chunks` is not read): the fan-out the run waits at now
    needs: chunk
    if: ${{ !cancelled() }}
    runs-on: ubuntu-latest
    timeout-minutes: 10
    permissions: {}
    outputs:
      chunks: ${{ steps.delivery.outputs.chunks }}
    steps:
      - name: App token, reading this repository (the runs' state refs)
        id: app-token
        uses: actions/create-github-app-token@67018539274d69449ef7c02e8e71183d1719ab42  # v2.1.4
        with:
          app-id: ${{ vars.DELIVERY_APP_ID }}
          private-key: ${{ secrets.app-private-key }}
          permission-contents: read
          permission-actions: read  # is a chunk's claim held by a job still running?
      - name: The chunks left for the next round
        id: delivery
        uses: your-org/delivery@0123456789abcdef0123456789abcdef01234567  # the release you vetted
        with:
          github-token: ${{ steps.app-token.outputs.token }}
          mode: join
          run-id: ${{ inputs.run-id }}
'''

RELAY: Final = r'''# Each target repository's relay (copy to .github/workflows/delivery.yml there): GitHub
# delivers a PR's events only to its own repository, so this passes them on to the run
# that owns the PR (`--for-pr`), whose state is in the control repository.
name: delivery relay

on:
  workflow_run:  # zizmor: ignore[dangerous-triggers] -- no PR code is checked out or run: it only wakes the run (CI by Actions raises no check_suite)
    workflows: [ci]  # the names of this repository's CI workflows
    types: [completed]
  pull_request_review:
    types: [submitted]
  pull_request_review_comment:
    types: [created]
  issue_comment:  # zizmor: ignore[dangerous-triggers] -- comment text is untrusted data to the run; answers need write permission, asked of the API
    types: [created]
  pull_request:
    types: [closed, labeled, unlabeled]
  status:

permissions: {}

jobs:
  relay:
    uses: your-org/delivery/.github/workflows/delivery-relay.yml@0123456789abcdef0123456789abcdef01234567  # the release you vetted
    with:
      control-repository: octo/control
      app-id: ${{ vars.DELIVERY_APP_ID }}
    secrets:
      app-private-key: ${{ secrets.DELIVERY_APP_PRIVATE_KEY }}
      anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}
'''
