"""The owner's per-user disk total holds sandbox code too: on images in the kernel (a ballast beside
the workspace), elsewhere by measuring after each exec and each sweep; reading and shrinking never stop."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from quotas.models import SandboxActivity, WorkspaceDiskUsage
from tests.fixtures.items import exec_ok, item_url
from workspace.items.services import workspaces_sweep
from workspace.sandboxes import volumes
from workspace.sandboxes.filestore import workspace_bytes, workspace_dir

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("real_boundary")]
MIB = 1024**2
# A notebook whose workspace may hold 4M, so the owner's total (5M over two items) binds first.
NOTEBOOK_4M = 'slug = "notebook"\nname = "Notebook"\n[resources]\nmemory = "64M"\ndisk = "4M"\n'
WRITE_4M = "head -c 4194304 /dev/zero > big"


@pytest.fixture
def carol_5m(write_config, per_user_disk, api_client_for):
    """carol, whose notebooks may hold 4M each and who may hold 5M in all; her API client."""
    write_config("[sandbox]\nlease = '90s'\n", apps={"notebook.toml": NOTEBOOK_4M})
    per_user_disk("carol", "5M")
    return api_client_for("carol")


def _recorded(item) -> int:
    return WorkspaceDiskUsage.objects.get(item_id=str(item.pk)).bytes


def test_a_command_cannot_grow_a_workspace_past_its_owners_remaining_total(carol_5m, make_item):
    # Given carol's first notebook holding 3M
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    exec_ok(carol_5m, first, "head -c 3145728 /dev/zero > three")
    # When a command in her second notebook writes 4M, which that notebook alone would allow
    body = exec_ok(carol_5m, second, WRITE_4M)
    # Then the kernel stops it where her 5M total ends, and the ledger holds both
    assert "No space left on device" in body["stderr"]
    assert workspace_bytes(workspace_dir(second.pk)) <= 5 * MIB - _recorded(first)
    assert _recorded(first) + _recorded(second) <= 5 * MIB


def test_at_the_total_reading_and_deleting_work_and_free_room_again(carol_5m, make_item):
    # Given carol at her 5M total across two notebooks
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    exec_ok(carol_5m, first, "head -c 3145728 /dev/zero > three")
    exec_ok(carol_5m, second, WRITE_4M)
    # When she reads the second's file, deletes it, and writes 1M there
    read = exec_ok(carol_5m, second, "wc -c < big")
    rewritten = exec_ok(carol_5m, second, "rm big && head -c 1048576 /dev/zero > one && wc -c < one")
    # Then each works, and the sandbox goes on
    assert int(read["stdout"]) > MIB
    assert (rewritten["exit_code"], rewritten["stdout"]) == (0, "1048576\n")
    assert rewritten["sandbox_closed"] is False


def test_a_sweep_takes_room_from_a_live_sandbox_when_another_item_grew(carol_5m, make_item):
    # Given carol's second notebook with a live sandbox, then 3M uploaded to her first one
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    exec_ok(carol_5m, second, "true")
    upload = carol_5m.put(item_url(first, "/files/three"), b"x" * 3 * MIB, content_type="application/octet-stream")
    assert upload.status_code == 200
    # When the sweep measures her workspaces
    workspaces_sweep()
    # Then what sandbox code may still write in the second is what her total has left
    stats = os.statvfs(workspace_dir(second.pk))
    assert stats.f_bavail * stats.f_frsize <= 5 * MIB - _recorded(first) - _recorded(second)


def test_the_ballast_is_out_of_reach_of_sandbox_code_and_the_file_api(carol_5m, make_item):
    # Given carol's notebook under her per-user total, so its image holds a ballast
    item = make_item(created_by="carol")
    body = exec_ok(carol_5m, item, "ls -a; ls -a ..; df -k . | tail -1")
    # Then neither the sandbox nor the file API sees it, and df shows the room her total leaves
    listing = carol_5m.get(item_url(item, "/files/")).content.decode()
    assert "ballast" not in body["stdout"] + listing
    available_kib = int(body["stdout"].split()[-3])
    assert available_kib * 1024 <= 5 * MIB


def test_deleted_files_give_their_blocks_back_to_the_host(carol_5m, make_item):
    # Given carol's notebook holding 2M of data, which the sparse image on the host now stores
    item = make_item(created_by="carol")
    exec_ok(carol_5m, item, "head -c 2097152 /dev/urandom > data && sync")
    image = volumes.image_path(workspace_dir(item.pk))
    stored = image.stat().st_blocks * 512
    # When the file is deleted
    exec_ok(carol_5m, item, "rm data && sync")
    # Then the image takes about 2M less on the host (the mount discards freed blocks)
    assert image.stat().st_blocks * 512 <= stored - 3 * MIB // 2


def test_an_image_of_the_earlier_layout_keeps_its_files(tmp_path):
    # Given an image made before the ballast existed: its files at its root, not mounted
    directory = tmp_path / "workspaces" / "9"
    image = volumes.image_path(directory)
    image.parent.mkdir(parents=True)
    with open(image, "wb") as handle:
        handle.truncate(2 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", str(image)], check=True)
    staging = tmp_path / "old"
    staging.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(staging)], check=True)
    (staging / "notes.txt").write_text("kept")
    (staging / "workspace").mkdir()
    subprocess.run(["umount", str(staging)], check=True)
    # When it is next mounted
    volumes.workspace_prepare(directory, limit_bytes=MIB, uid=None)
    # Then its files, a folder named like the new layout's included, are the workspace
    assert volumes.is_bounded(directory)
    assert (directory / "notes.txt").read_text() == "kept"
    assert sorted(path.name for path in directory.iterdir()) == ["lost+found", "notes.txt", "workspace"]


@pytest.fixture
def measured(settings) -> None:
    """Workspaces are plain directories measured after each exec (no images)."""
    settings.WORKSPACE_DISK_ENFORCEMENT = "measure"


def test_without_images_a_command_past_the_owners_total_stops_its_sandbox(measured, carol_5m, make_item):
    # Given carol's first notebook holding 3M, in plain measured workspaces
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    within = exec_ok(carol_5m, first, "head -c 3145728 /dev/zero > three")
    # When a command in her second notebook writes 3M more
    past = exec_ok(carol_5m, second, "head -c 3145728 /dev/zero > more")
    # Then the first command's sandbox runs on, the second's is stopped and its reply says why
    assert within["sandbox_closed"] is False
    assert past["sandbox_closed"] is True
    assert "per-user disk total" in past["stderr"]
    assert SandboxActivity.objects.get(backend_sandbox_id=past["sandbox_id"]).close_reason == "disk"


def test_without_images_over_the_total_reading_and_deleting_are_not_stopped(measured, carol_5m, make_item):
    # Given carol over her 5M total in plain measured workspaces
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    exec_ok(carol_5m, first, "head -c 3145728 /dev/zero > three")
    exec_ok(carol_5m, second, "head -c 3145728 /dev/zero > more")
    # When she reads in one notebook and deletes in the other
    read = exec_ok(carol_5m, second, "wc -c < more")
    deleted = exec_ok(carol_5m, first, "rm three")
    # Then neither command stops its sandbox
    assert (read["stdout"], read["sandbox_closed"]) == ("3145728\n", False)
    assert deleted["sandbox_closed"] is False


def test_without_images_a_sweep_stops_a_sandbox_that_grew_while_its_owner_is_over(measured, carol_5m, make_item):
    # Given carol's two notebooks with live sandboxes, one of which then grew by 6M behind the
    # service's back (as a background writer would)
    grown, idle = make_item(created_by="carol"), make_item(created_by="carol")
    exec_ok(carol_5m, grown, "true")
    exec_ok(carol_5m, idle, "echo small > small")
    Path(workspace_dir(grown.pk) / "background").write_bytes(b"x" * 6 * MIB)
    # When the sweep measures her over her total
    workspaces_sweep()
    # Then the sandbox whose workspace grew is stopped, and the other runs on
    assert SandboxActivity.objects.get(item_id=str(grown.pk)).close_reason == "disk"
    assert SandboxActivity.current.filter(item_id=str(idle.pk)).exists()
