"""Where a run's state lives (SPEC §11): the `RunStore` seam and its local implementation.

    base.py       RunStore (one run's store) and RunStores (makes and opens them); Loaded
    records.py    the typed records: RunInfo (run.json), RunState (a snapshot), StageRecord
                  (one stage's changes), RunStatus, GateMode (outcomes: delivery.lang.outcomes)
    runstore.py   LocalRunStore: the run directory; verify_run; new_run_id
    eventlog.py   the hash-chained event log (stage records are `state` events in it)
    eventchain.py reading and checking the log's chain (read_after, verify_events)
    tail.py       events.tail: the log's unflushed end, flushed in place once per stage
    artifacts.py  large context values, one file each
    files.py      file operations that never follow a symlink; sealed (checksummed) files

Import from the submodules; this package imports nothing eagerly.
"""
