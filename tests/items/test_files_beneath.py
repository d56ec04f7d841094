"""The file API never leaves the workspace, even when sandbox code swaps a folder for a symlink
between the path check and the write (the check-then-use race)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collab.errors import DomainError
from workspace.sandboxes import beneath, filestore


@pytest.fixture
def root_and_outside(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "workspace", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    return root, outside


def test_a_symlink_that_stays_inside_is_followed(root_and_outside):
    # Given a folder and a symlink to it inside the workspace
    root, _ = root_and_outside
    (root / "v2").mkdir()
    (root / "v2" / "notes.txt").write_text("inside")
    (root / "latest").symlink_to("v2")
    # When the file is opened through the symlink / Then it is read
    with os.fdopen(beneath.open_beneath(root, "latest/notes.txt", os.O_RDONLY), "rb") as handle:
        assert handle.read() == b"inside"


def test_opening_through_a_symlink_that_leaves_is_refused(root_and_outside):
    # Given sandbox code replaced a folder with a symlink to a host folder
    root, outside = root_and_outside
    (root / "docs").symlink_to(outside)
    # When the server opens a path through it / Then the kernel refuses
    with pytest.raises(beneath.Escape):
        beneath.open_beneath(root, "docs/secret.txt", os.O_RDONLY)


def test_a_write_raced_by_a_symlink_swap_lands_nowhere_outside(monkeypatch, root_and_outside):
    # Given the path check passed while "docs" was a folder, and then "docs" became a symlink out
    root, outside = root_and_outside
    (root / "docs").symlink_to(outside)
    monkeypatch.setattr(filestore, "resolve", lambda root, path: root / path)
    # When the write goes ahead
    with pytest.raises(DomainError) as refused:
        filestore.stage(root, "docs/planted.txt", [b"payload"])
    # Then it is refused as invalid_path and nothing was created outside
    assert refused.value.error == "invalid_path"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_read_raced_by_a_symlink_swap_reads_nothing_outside(root_and_outside):
    # Given a file that was checked, then replaced by a symlink to a host secret
    root, outside = root_and_outside
    (root / "report.txt").symlink_to(outside / "secret.txt")
    # When it is opened for download / Then it is refused as invalid_path
    with pytest.raises(DomainError) as refused:
        filestore.open_read(root, root / "report.txt")
    assert refused.value.error == "invalid_path"


def test_a_delete_raced_by_a_symlink_swap_deletes_nothing_outside(monkeypatch, root_and_outside):
    # Given "docs" became a symlink to a host folder after the check
    root, outside = root_and_outside
    (root / "docs").symlink_to(outside)
    monkeypatch.setattr(filestore, "resolve", lambda root, path: root / path)
    monkeypatch.setattr(filestore, "workspace_prepared", lambda workspace_id, limit_bytes: root)
    ref = filestore.WorkspaceRef(workspace_id=1)
    # When a delete of docs/secret.txt goes ahead / Then it is refused
    with pytest.raises(DomainError):
        filestore.delete_path(ref, "docs/secret.txt")
    # Then the host file stays
    assert (outside / "secret.txt").read_text() == "host secret"


def test_the_walk_without_openat2_refuses_every_symlink(monkeypatch, root_and_outside):
    # Given a kernel without openat2, and a folder v2 with a symlink latest to it
    root, _ = root_and_outside
    monkeypatch.setattr(beneath, "_has_openat2", False)
    (root / "v2").mkdir()
    (root / "v2" / "a.txt").write_text("a")
    (root / "latest").symlink_to("v2")
    # When a real folder's file is opened / Then it opens
    os.close(beneath.open_beneath(root, "v2/a.txt", os.O_RDONLY))
    # When a path through the symlink is opened / Then it is refused
    with pytest.raises(beneath.Escape):
        beneath.open_beneath(root, "latest/a.txt", os.O_RDONLY)


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_a_name_over_the_filesystems_limit_is_a_clear_400(alice_api, make_item, method):
    # Given a file name of 300 bytes
    item = make_item()
    url = f"/a/{item.app_slug}/items/{item.pk}/files/{'n' * 300}"
    # When it is read, written or deleted
    if method == "put":
        response = alice_api.put(url, b"x", content_type="application/octet-stream")
    else:
        response = getattr(alice_api, method)(url)
    # Then the answer is 400 invalid_path, not a server error
    assert (response.status_code, response.json()["error"]) == (400, "invalid_path")
