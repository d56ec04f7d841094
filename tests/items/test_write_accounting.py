"""Writes into one workspace account for each other exactly, and an upload over quota is cut off
while it streams in rather than stored whole first."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from collab.errors import DomainError
from workspace.items.workspaces import item_workspace_ref
from workspace.sandboxes import filestore
from workspace.sandboxes.filestore import CHUNK, workspace_dir

pytestmark = pytest.mark.django_db
MIB = 1024 * 1024
# Above the write buffer, so a staged piece is on disk while it waits.
PIECE = 16 * 1024


def test_ten_concurrent_writes_admit_exactly_the_ones_that_fit(write_config, make_item):
    # Given a workspace limit of 48K and ten writers of 16K each
    write_config('[sandbox]\nworkspace_quota = "48K"\n')
    item = make_item()
    ref = replace(item_workspace_ref(item), payer="alice")
    start, staged, outcomes = threading.Barrier(10), threading.Barrier(10), []

    def chunks() -> Iterator[bytes]:
        yield b"x" * PIECE
        # Hold every writer here until all ten are staged: if writes were not serialised, each
        # check would now see the others' temp files.
        with contextlib.suppress(threading.BrokenBarrierError):
            staged.wait(timeout=0.2)

    def write(n: int) -> None:
        start.wait()
        try:
            filestore.write_file(ref, f"f{n}.bin", chunks())
            outcomes.append("stored")
        except DomainError as refused:
            outcomes.append(refused.error)

    # When all ten write at once
    threads = [threading.Thread(target=write, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly three are stored and seven refused with the workspace's 507
    assert sorted(outcomes) == ["stored"] * 3 + ["workspace_quota_exceeded"] * 7
    assert filestore.workspace_bytes(workspace_dir(item.pk)) == 3 * PIECE


def test_an_upload_over_quota_is_refused_at_most_one_chunk_past_it(write_config, make_item):
    # Given a workspace limit of 2M and an upload of 8M arriving chunk by chunk
    write_config('[sandbox]\nworkspace_quota = "2M"\n')
    item = make_item()
    ref = replace(item_workspace_ref(item), payer="alice")
    consumed = []

    def upload() -> Iterator[bytes]:
        for _ in range(8):
            consumed.append(CHUNK)
            yield b"x" * CHUNK

    # When it is written
    with pytest.raises(DomainError) as refused:
        filestore.write_file(ref, "big.bin", upload())
    # Then it is refused with the 507 before the rest arrives, and nothing is left behind
    assert refused.value.error == "workspace_quota_exceeded"
    assert sum(consumed) <= 2 * MIB + CHUNK
    assert list(workspace_dir(item.pk).iterdir()) == []


def test_an_upload_within_quota_is_stored_whole(write_config, make_item):
    # Given a workspace limit of 8M
    write_config('[sandbox]\nworkspace_quota = "8M"\n')
    item = make_item()
    ref = replace(item_workspace_ref(item), payer="alice")
    # When alice writes a file of three chunks
    change = filestore.write_file(ref, "fits.bin", (b"y" * CHUNK for _ in range(3)))
    # Then all of it is stored
    assert change.new_size == 3 * CHUNK


def test_a_write_through_a_plain_workspace_reference_is_checked_by_its_items_limits(write_config, make_item):
    # Given a workspace limit of 2M and an item's workspace named by its id alone (no app, no payer)
    write_config('[sandbox]\nworkspace_quota = "2M"\n')
    item = make_item()
    ref = filestore.WorkspaceRef(workspace_id=item.pk, limit_bytes=2 * MIB)
    # When 3M are written there / Then the disk check finds the item's app and payer itself and
    # refuses with the workspace's 507, and nothing is stored
    with pytest.raises(DomainError) as refused:
        filestore.write_file(ref, "big.bin", [b"x" * (3 * MIB)])
    assert refused.value.error == "workspace_quota_exceeded"
    assert not (workspace_dir(item.pk) / "big.bin").exists()
