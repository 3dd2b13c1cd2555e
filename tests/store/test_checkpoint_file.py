"""checkpoint.json written over its previous copy and swapped in, and what a crash leaves."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from delivery.errors import RunStoreError
from delivery.store.checkpoint_file import (
    PREVIOUS_NAME,
    CheckpointFile,
    read_sealed,
    seal,
    write_replacing,
)

swapping = pytest.mark.skipif(not sys.platform.startswith("linux"),
                              reason="renameat2(RENAME_EXCHANGE) is Linux-only")


def save(file: CheckpointFile, value: dict[str, object]) -> None:
    file.save(json.dumps(value).encode() + b"\n")


@pytest.mark.parametrize("swap", [True, False], ids=["swapping", "replacing"])
def test_the_last_save_is_what_loads(tmp_path: Path, swap: bool) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json", swap=swap)
    assert file.load() is None
    for steps in range(1, 6):
        save(file, {"steps": steps, "pad": "x" * (9000 - 1000 * steps)})  # shrinking
    assert file.load() == {"steps": 5, "pad": "x" * 4000}
    assert read_sealed(tmp_path / "checkpoint.json")[0]["steps"] == 5


@swapping
def test_swapping_keeps_the_previous_checkpoint_beside_the_current_one(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json")
    save(file, {"steps": 1})
    save(file, {"steps": 2})
    inode = (tmp_path / "checkpoint.json").stat().st_ino
    save(file, {"steps": 3})
    assert read_sealed(tmp_path / PREVIOUS_NAME)[0] == {"steps": 2}
    # no new file per save: the two files trade names
    assert (tmp_path / PREVIOUS_NAME).stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", PREVIOUS_NAME]


@swapping
def test_sizes_are_padded_to_whole_blocks_and_rarely_shrink(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json")
    sizes = []
    for pad in (9000, 9000, 5000, 100):
        save(file, {"pad": "x" * pad})
        sizes.append((tmp_path / "checkpoint.json").stat().st_size)
        assert file.load() == {"pad": "x" * pad}
    # 5000 needs 8 KiB of the 12 the file has: kept; 100 needs a third of it: cut
    assert sizes == [12288, 12288, 12288, 4096]


def test_a_save_killed_while_writing_over_the_previous_copy_loses_nothing(
        tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json")
    save(file, {"steps": 1})
    save(file, {"steps": 2})
    # what a kill in the middle of the in-place write leaves: the spare is torn
    (tmp_path / PREVIOUS_NAME).write_text('{"steps": 3, "pa')
    assert file.load() == {"steps": 2}


def test_a_torn_current_file_after_a_power_failure_falls_back_to_the_previous(
        tmp_path: Path) -> None:
    # A power failure can undo the swap while the in-place write reached the disk in part.
    (tmp_path / PREVIOUS_NAME).write_text(json.dumps({"steps": 7}))
    (tmp_path / "checkpoint.json").write_text('{"steps": 8, "cont')
    file = CheckpointFile(tmp_path / "checkpoint.json")
    assert file.load() == {"steps": 7}
    file.recover()
    assert read_sealed(tmp_path / "checkpoint.json")[0] == {"steps": 7}
    save(file, {"steps": 8})  # written over the torn file, never over the good one
    assert file.load() == {"steps": 8}


def test_a_complete_current_file_wins_even_when_the_previous_is_further_along(
        tmp_path: Path) -> None:
    # a swap undone by a power failure, both files complete: one stage more runs again
    (tmp_path / PREVIOUS_NAME).write_text(json.dumps({"steps": 9}))
    (tmp_path / "checkpoint.json").write_text(json.dumps({"steps": 8}))
    assert CheckpointFile(tmp_path / "checkpoint.json").load() == {"steps": 8}


def test_recover_changes_nothing_when_the_current_file_is_complete(tmp_path: Path) -> None:
    (tmp_path / PREVIOUS_NAME).write_text(json.dumps({"steps": 9}))
    (tmp_path / "checkpoint.json").write_text(json.dumps({"steps": 8}))
    CheckpointFile(tmp_path / "checkpoint.json").recover()
    assert read_sealed(tmp_path / "checkpoint.json")[0] == {"steps": 8}
    assert read_sealed(tmp_path / PREVIOUS_NAME)[0] == {"steps": 9}


def test_a_missing_current_file_is_restored_from_the_previous(tmp_path: Path) -> None:
    (tmp_path / PREVIOUS_NAME).write_text(json.dumps({"steps": 3}))
    file = CheckpointFile(tmp_path / "checkpoint.json")
    file.recover()
    assert read_sealed(tmp_path / "checkpoint.json")[0] == {"steps": 3}


def test_both_files_corrupt_is_an_error_naming_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / PREVIOUS_NAME).write_text("{")
    (tmp_path / "checkpoint.json").write_text("[")
    with pytest.raises(RunStoreError, match=r"checkpoint\.json: corrupt checkpoint"):
        CheckpointFile(tmp_path / "checkpoint.json").load()


def test_write_replacing_leaves_no_temporary_file_and_reports_failures(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_replacing(target, b"{}\n")
    assert os.listdir(tmp_path) == ["run.json"]
    with pytest.raises(RunStoreError, match="cannot write"):
        write_replacing(tmp_path / "missing" / "run.json", b"{}")


def test_without_fallback_a_torn_current_file_is_reported_with_the_way_out(
        tmp_path: Path) -> None:
    (tmp_path / PREVIOUS_NAME).write_text(json.dumps({"steps": 7}))
    (tmp_path / "checkpoint.json").write_text('{"steps": 8, "cont')
    with pytest.raises(RunStoreError, match=r"corrupt checkpoint: .*previous\.json is "
                                            r"complete: resuming the run restores it"):
        CheckpointFile(tmp_path / "checkpoint.json").load(fallback=False)


def test_a_saved_checkpoint_ends_with_the_checksum_of_what_precedes_it(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json")
    save(file, {"steps": 1})
    raw = json.loads((tmp_path / "checkpoint.json").read_bytes())
    assert list(raw) == ["steps", "checksum"]
    assert seal(b"{}") == b'{"checksum":"' + hashlib.sha256(b"{}").hexdigest().encode() + b'"}\n'
    assert read_sealed(tmp_path / "checkpoint.json") == ({"steps": 1}, "")


def test_a_torn_file_that_still_parses_is_caught_by_its_checksum(tmp_path: Path) -> None:
    # new blocks before old ones can make valid JSON: here the cut falls inside a string
    old = seal(b'{"steps":1,"note":"' + b"a" * 40 + b'"}')
    new = seal(b'{"steps":2,"note":"' + b"c" * 60 + b'"}')
    torn = new[:25] + old[25:]
    assert json.loads(torn)["steps"] == 2  # it parses...
    (tmp_path / "checkpoint.json").write_bytes(torn)
    assert read_sealed(tmp_path / "checkpoint.json")[0] is None  # ...but is not taken
    (tmp_path / PREVIOUS_NAME).write_bytes(old)
    file = CheckpointFile(tmp_path / "checkpoint.json")
    assert file.load() == {"steps": 1, "note": "a" * 40}
    assert "checksum does not match" in file.recover()
    assert read_sealed(tmp_path / "checkpoint.json")[0] == {"steps": 1, "note": "a" * 40}


def test_an_edit_that_keeps_the_stale_checksum_is_reported(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoint.json")
    save(file, {"steps": 1})
    edited = json.loads((tmp_path / "checkpoint.json").read_bytes()) | {"steps": 5}
    (tmp_path / "checkpoint.json").write_text(json.dumps(edited))
    (tmp_path / PREVIOUS_NAME).unlink(missing_ok=True)
    with pytest.raises(RunStoreError, match='delete the "checksum" member'):
        file.load()
