"""The validated-model cache of a run (`<run>/workflow.model.json`): what resume reads
instead of parsing, building and validating the run's workflow copy again.

A resume used to re-load `workflow.dot` whole (0.3-0.5 s for a 5,000-stage workflow, the
largest part of its start-up). The run's copy never changes (resume refuses a copy whose
SHA-256 differs from run.json's), so the model built from it — and the warnings a fresh
load prints — are written once, when the run starts, and read back on every resume.

The file is plain JSON (never pickle: reading it runs no code), the model in columns
(`delivery.store.model_codec`), keyed by:

- the SHA-256 of the workflow copy's bytes,
- `SCHEMA` (this module's format) and a fingerprint of the code that builds and validates
  models (`delivery.lang`, `delivery.validation`): a model built by other code is stale.

and ends with a checksum of its content (`delivery.store.files.seal`). Anything else — no
file, a symlink in its place, bad JSON, a failed checksum, another schema, another key, a
field the schema does not know — is a miss: the copy is loaded as before and the cache
written again. A failure to write it is not an error (the next resume loads the copy).

Trust: the checksum catches accidents (a torn write, a flipped byte), not a deliberate
edit that recomputes it. So the SHA-256 of the cache written when the run started is kept
in the run's event log (its `run_started` event, as the copy's is), and a resume uses only
a cache with those bytes (SPEC §14: a stage's process may have rewritten the file); any
other is a miss. A run whose start wrote no cache loads its copy on every resume.

Only a workflow without errors is cached (a run never starts on one with errors). How the
model is stored, and checked as it is read back: `delivery.store.model_codec`.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from delivery.errors import RunStoreError, WorkflowError, WorkflowInvalid
from delivery.lang.diagnostics import Diagnostic, has_errors
from delivery.lang.model import Workflow
from delivery.store.files import NOFOLLOW, open_file, read_file, seal, seal_holds, write_all
from delivery.store.model_codec import (
    decode_diagnostics,
    decode_model,
    encode_diagnostics,
    encode_model,
)
from delivery.store.runstore import MODEL_CACHE
from delivery.validation.loader import (
    MAX_WORKFLOW_BYTES,
    check_file,
    check_source,
    load_workflow,
)

CACHE_FILE: Final = MODEL_CACHE
# Bumped when the file's format changes (an older file is then a miss). 2: the model in
# columns (delivery.store.model_codec), read without pydantic.
SCHEMA: Final = 2
# The file's members, all required, no others.
FILE_KEYS: Final = frozenset({"schema_version", "code", "workflow_sha256", "file",
                              "diagnostics", "model", "checksum"})

log = logging.getLogger("delivery")

_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
# what a malformed file can raise while it is taken apart (a miss, never the caller's)
_MALFORMED: Final = (ValueError, TypeError, KeyError, IndexError, RecursionError,
                     WorkflowError)


@dataclass(frozen=True)
class CachedWorkflow:
    """A run's workflow as a fresh load gives it: the model and every diagnostic (only
    warnings: a workflow with errors never runs)."""

    workflow: Workflow
    diagnostics: tuple[Diagnostic, ...]
    from_cache: bool  # False: the copy was loaded (and the cache written)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading a model makes tens of thousands of small acyclic objects: the cyclic
    collector would scan them again and again and free nothing (as in the loader)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# -- the key ---------------------------------------------------------------------------
@cache
def code_fingerprint() -> str:
    """A SHA-256 of the sources of `delivery.lang` and `delivery.validation` (what builds
    and validates a model): another release, or a developer's edit to either, makes older
    caches stale without a version bump. Computed once per process (~1 ms)."""
    digest = hashlib.sha256()
    for package in ("lang", "validation"):
        folder = Path(__file__).resolve().parent.parent / package
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        except OSError:
            return ""  # not readable as files (a zip import): no caching
        for name in names:
            try:
                data = (folder / name).read_bytes()
            except OSError:
                return ""
            digest.update(f"\0{package}/{name}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


# -- writing -------------------------------------------------------------------------------
def cache_bytes(workflow: Workflow, diagnostics: Iterable[Diagnostic], source: bytes,
                file: str) -> bytes:
    """The cache file's bytes for `workflow` built from `source` as the file `file`
    (`workflow.file` and the diagnostics' file are replaced by it: the run loads its copy,
    not the file the run was started with)."""
    body = {
        "schema_version": SCHEMA, "code": code_fingerprint(),
        "workflow_sha256": hashlib.sha256(source).hexdigest(), "file": file,
        "diagnostics": encode_diagnostics(diagnostics, workflow.file, file),
        "model": encode_model(workflow, file),
    }
    return seal(_ENCODER.encode(body).encode())


def write_cache(run_dir: Path, workflow: Workflow, diagnostics: Sequence[Diagnostic],
                source: bytes, file: str) -> str:
    """Write the cache of `run_dir` and return the SHA-256 of the bytes written — or not,
    saying why in the debug log (""): it is only ever a shortcut. Not flushed: a torn file
    fails its checksum and is rebuilt. A workflow with errors is not cached, nor is one when
    the code cannot be fingerprinted."""
    if has_errors(diagnostics) or not code_fingerprint():
        return ""
    try:
        data = cache_bytes(workflow, diagnostics, source, file)
    except (ValueError, TypeError) as error:  # a model the rows cannot hold: load as before
        log.debug("model cache not written: %s", error)
        return ""
    target = run_dir / CACHE_FILE
    # a fresh name and a rename: a symlink planted at the cache's name is replaced, never
    # written through (as every file of the run store)
    tmp = run_dir / f"{CACHE_FILE}.{secrets.token_hex(8)}.tmp"
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except (OSError, RunStoreError) as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        log.debug("model cache not written: %s", error)
        return ""
    return hashlib.sha256(data).hexdigest()


# -- reading -------------------------------------------------------------------------------
def read_cache(run_dir: Path, source: bytes, file: str,
               trusted: str | None = None) -> CachedWorkflow | None:
    """The cached workflow of `run_dir` if the cache holds the one built from `source` by
    this code, naming `file`; None (and why, in the debug log) for anything else. With
    `trusted` (the SHA-256 of the cache the run started with, from its event log), a
    cache with other bytes is not used either ("": none is)."""
    path = run_dir / CACHE_FILE
    try:
        data = read_file(path, "model cache")  # never through a symlink
    except RunStoreError as error:
        log.debug("model cache ignored: %s", error)
        return None
    if data is None:
        return None
    if trusted is not None and hashlib.sha256(data).hexdigest() != trusted:
        log.debug("model cache ignored: %s: not the one the run started with", path)
        return None
    found = parse_cache(data, source, file, str(path))
    if found is None or has_errors(found.diagnostics):
        return None
    return found


def parse_cache(data: bytes, source: bytes, file: str,
                where: str = CACHE_FILE) -> CachedWorkflow | None:
    """The workflow a cache file's bytes hold, if they hold the one built from `source`
    by this code, named `file`; None (and why, in the debug log) otherwise."""
    if not seal_holds(data):
        log.debug("model cache ignored: %s: its checksum does not match", where)
        return None
    try:
        with _collector_paused():
            found = _decoded(data, source, file)
    except _MALFORMED as error:
        log.debug("model cache ignored: %s: %s", where, str(error).splitlines()[0]
                  if str(error) else type(error).__name__)
        return None
    if found is None:
        log.debug("model cache ignored: %s: built from another workflow or by other code",
                  where)
    return found


def _decoded(data: bytes, source: bytes, file: str) -> CachedWorkflow | None:
    """The cache's workflow; None when it has another key; one of _MALFORMED when it is not
    what `cache_bytes` writes."""
    value = json.loads(data)
    if type(value) is not dict or value.keys() != FILE_KEYS:
        raise ValueError("not an object with the cache file's members")
    version = value["schema_version"]
    if type(version) is not int or version != SCHEMA:
        raise ValueError(f"schema version {str(version)[:20]}, not {SCHEMA}")
    if (value["code"], value["workflow_sha256"]) != (code_fingerprint(),
                                                      hashlib.sha256(source).hexdigest()):
        return None
    was = value["file"]
    if type(was) is not str:
        raise ValueError("'file' is not a string")
    # The path is only a name in the model and its messages (nothing is read through it):
    # a run directory moved (or fetched elsewhere, SPEC §13) names where its copy is now.
    workflow = decode_model(value["model"], file)
    return CachedWorkflow(workflow, decode_diagnostics(value["diagnostics"], was, file),
                          from_cache=True)


def load_run_workflow(run_dir: Path, copy: Path, source: bytes,
                      trusted: str | None = None) -> CachedWorkflow:
    """The run's workflow from its cache (`trusted`: see read_cache), or loaded from
    `source` (the bytes of `copy`) as `load_workflow(copy)` would (WorkflowSyntaxError /
    WorkflowInvalid) and cached."""
    file = str(copy)
    found = read_cache(run_dir, source, file, trusted)
    if found is not None:
        return found
    workflow: Workflow | None = None
    diagnostics: list[Diagnostic] = []
    if len(source) <= MAX_WORKFLOW_BYTES:
        with contextlib.suppress(UnicodeDecodeError):
            workflow, diagnostics = check_source(source.decode("utf-8"), file)
    if workflow is None:
        load_workflow(copy)  # raises what a fresh load raises (too large, not UTF-8, syntax)
    if workflow is None or has_errors(diagnostics):
        raise WorkflowInvalid(file, diagnostics)
    write_cache(run_dir, workflow, diagnostics, source, file)
    return CachedWorkflow(workflow, tuple(diagnostics), from_cache=False)


def load_checked(path: Path) -> tuple[Workflow, list[Diagnostic]]:
    """`load_workflow(path)` with the warnings it found (what the cache keeps): the same
    model, or the same WorkflowSyntaxError / WorkflowInvalid."""
    workflow: Workflow | None = None
    diagnostics: list[Diagnostic] = []
    with contextlib.suppress(UnicodeDecodeError):
        workflow, diagnostics = check_file(path)
    if workflow is None:
        load_workflow(path)  # raises what a fresh load raises (too large, not UTF-8, syntax)
    if workflow is None or has_errors(diagnostics):
        raise WorkflowInvalid(str(path), diagnostics)
    return workflow, diagnostics
