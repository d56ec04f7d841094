"""What sandbox code leaves in a workspace is hostile input: FIFOs, sockets, sparse files, names
with newlines or bytes that are not UTF-8, folders nested 1500 deep. The file API, the pages and
the disk measurement open only regular files and folders, bound every walk, and never block."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from collab.errors import DomainError
from quotas import ledger
from tests.fixtures.items import item_url
from workspace.items.services import items_delete, workspaces_sweep
from workspace.items.workspaces import item_workspace_root
from workspace.sandboxes import filestore
from workspace.sandboxes.filestore import workspace_bytes, workspace_dir

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html", "HTTP_X_USER_ID": "alice"}
GIB = 1024**3
NOBODY = 65534


def _put(api, item, path: str, data: bytes):
    return api.put(item_url(item, f"/files/{quote(path)}"), data, content_type="application/octet-stream")


def _batch(api, item, *operations: dict):
    return api.post(item_url(item, "/files:batch"), {"operations": list(operations)}, format="json")


@pytest.fixture
def fifo_item(make_item):
    """alice's notebook holding a FIFO `p1`, a folder `d` with a FIFO and a text file, and a note."""
    item = make_item(files={"note.txt": b"old text", "d/a.txt": b"old in d"})
    root = workspace_dir(item.pk)
    os.mkfifo(root / "p1")
    os.mkfifo(root / "d" / "p2")
    return item


# --- FIFOs, sockets and devices -------------------------------------------------------------


def test_downloading_a_fifo_is_a_clear_400_and_never_blocks(alice_api, fifo_item, fifo_guard):
    # Given sandbox code made a FIFO p1 in alice's workspace
    fifo = workspace_dir(fifo_item.pk) / "p1"
    # When she downloads it
    with fifo_guard(fifo):
        response = alice_api.get(item_url(fifo_item, "/files/p1"))
    # Then it is 400 not_a_regular_file, at once
    assert response.status_code == 400
    assert response.json()["error"] == "not_a_regular_file"
    assert "FIFO" in response.json()["detail"]


def test_a_file_swapped_for_a_fifo_after_its_check_is_refused_not_waited_on(fifo_item, fifo_guard):
    # Given a path the server checked as a regular file, which sandbox code then replaced by a FIFO
    root = workspace_dir(fifo_item.pk)
    # When the server opens it to send it
    with fifo_guard(root / "p1"), pytest.raises(DomainError) as refused:
        filestore.open_read(root, root / "p1")
    # Then the open neither blocks nor reads: it is refused
    assert refused.value.error == "not_a_regular_file"


def test_opening_a_fifo_in_the_editor_is_refused_on_the_item_page(client, fifo_item, fifo_guard):
    # Given the FIFO p1 in alice's notebook
    fifo = workspace_dir(fifo_item.pk) / "p1"
    # When her browser opens it in the editor, and as a raw download
    with fifo_guard(fifo):
        editor = client.get(item_url(fifo_item, "/files/p1"), **HTML)
        raw = client.get(item_url(fifo_item, "/files/p1?raw=1"), **HTML)
    # Then both come back as the item page with a 400 that says why, and the FIFO is still there
    assert (editor.status_code, raw.status_code) == (400, 400)
    assert "not a regular file" in editor.content.decode()
    assert fifo.exists()


def test_a_batch_replace_skips_a_fifo_and_changes_the_text_files(alice_api, fifo_item, fifo_guard):
    # Given FIFOs beside alice's text files
    root = workspace_dir(fifo_item.pk)
    # When she replaces "old" with "new" across the workspace
    with fifo_guard(root / "p1", root / "d" / "p2"):
        response = _batch(alice_api, fifo_item, {"op": "replace", "search": "old", "replace": "new"})
    # Then the text files change and the FIFOs are left as they are
    assert response.status_code == 200, response.content
    assert (root / "note.txt").read_bytes() == b"new text"
    assert (root / "d" / "a.txt").read_bytes() == b"new in d"


def test_a_folder_copy_skips_its_fifo_and_releases_the_write_lock(alice_api, fifo_item, fifo_guard):
    # Given a folder d holding a FIFO and a text file
    root = workspace_dir(fifo_item.pk)
    # When alice copies the folder, then writes a file
    with fifo_guard(root / "d" / "p2"):
        copied = _batch(alice_api, fifo_item, {"op": "copy", "from": "d", "to": "e"})
        written = _put(alice_api, fifo_item, "after.txt", b"still writable")
    # Then the copy holds the text file only, and the later write was not held up
    assert copied.status_code == 200, copied.content
    assert sorted(p.name for p in (root / "e").iterdir()) == ["a.txt"]
    assert written.status_code == 200


def test_copying_a_fifo_by_name_is_a_clear_400(alice_api, fifo_item, fifo_guard):
    # Given the FIFO p1
    # When alice copies it by name
    with fifo_guard(workspace_dir(fifo_item.pk) / "p1"):
        response = _batch(alice_api, fifo_item, {"op": "copy", "from": "p1", "to": "p1-copy"})
    # Then it is 400 not_a_regular_file and nothing is made
    assert (response.status_code, response.json()["error"]) == (400, "not_a_regular_file")
    assert not (workspace_dir(fifo_item.pk) / "p1-copy").exists()


def test_a_fifo_can_be_renamed_and_deleted(alice_api, fifo_item, fifo_guard):
    # Given the FIFO p1
    root = workspace_dir(fifo_item.pk)
    # When alice renames it, then deletes it
    with fifo_guard(root / "p1", root / "pipe"):
        moved = alice_api.post(item_url(fifo_item, "/files:move"), {"source": "p1", "target": "pipe"}, format="json")
        deleted = alice_api.delete(item_url(fifo_item, "/files/pipe"))
    # Then both are done and it is gone
    assert (moved.status_code, deleted.status_code) == (200, 200)
    assert not (root / "pipe").exists()


def test_the_file_list_and_item_page_show_fifos_without_opening_them(alice_api, client, fifo_item, fifo_guard):
    # Given FIFOs in alice's notebook
    root = workspace_dir(fifo_item.pk)
    # When she lists the files and opens the item page
    with fifo_guard(root / "p1", root / "d" / "p2"):
        listed = alice_api.get(item_url(fifo_item, "/files"))
        page = client.get(item_url(fifo_item), **HTML)
    # Then both answer, listing the FIFOs as entries of no size
    assert {entry["path"]: entry["size"] for entry in listed.json()}["p1"] == 0
    assert page.status_code == 200


def test_measuring_a_workspace_opens_no_fifo_socket_or_link_out(fifo_item, fifo_guard, tmp_path):
    # Given FIFOs, a listening socket, and links to a big file and to a folder outside
    root = workspace_dir(fifo_item.pk)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"z" * 100_000)
    (root / "big-link").symlink_to(outside / "big.bin")
    (root / "dir-link").symlink_to(outside)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "sock"))
    listener.listen()
    try:
        # When the workspace is measured
        with fifo_guard(root / "p1", root / "d" / "p2"):
            measured = workspace_bytes(root)
    finally:
        listener.close()
    # Then only its own files count (8 + 8 bytes of text, and the links as the paths they hold)
    links = len(str(outside / "big.bin")) + len(str(outside))
    assert measured <= 16 + links


# --- Sparse files ---------------------------------------------------------------------------


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_a_sparse_file_is_measured_by_the_blocks_it_holds(make_item):
    # Given a 10 GB sparse file beside 1000 bytes of text
    item = make_item(files={"a.txt": b"x" * 1000})
    _sparse(workspace_dir(item.pk) / "holes.bin", 10 * GIB)
    # When the workspace is measured / Then the sparse file counts for nothing it does not hold
    assert workspace_bytes(workspace_dir(item.pk)) == 1000


def test_a_sparse_file_does_not_lock_its_owner_out_of_writes(per_user, alice_api, make_item):
    # Given alice's 2G per-user limit and a 10 GB sparse file in her notebook, swept into the ledger
    per_user(workspace_quota="1G", disk="2G")
    item = make_item()
    _sparse(workspace_dir(item.pk) / "holes.bin", 10 * GIB)
    workspaces_sweep()
    # When she writes a small file into another notebook and into this one
    other = _put(alice_api, make_item(), "a.txt", b"hello")
    here = _put(alice_api, item, "b.txt", b"hello")
    # Then both are admitted, and the ledger charged the sparse file nothing
    assert (other.status_code, here.status_code) == (200, 200)
    assert ledger.disk_usage_of_item(item.pk).bytes == 0


def test_filling_a_sparse_file_with_data_is_growth(per_user, alice_api, make_item):
    # Given a 10 GB sparse file in a notebook whose app allows 1K
    per_user(workspace_quota="1K")
    item = make_item()
    _sparse(workspace_dir(item.pk) / "holes.bin", 10 * GIB)
    # When alice overwrites it with 2000 real bytes, fewer than its length
    response = _put(alice_api, item, "holes.bin", b"x" * 2000)
    # Then it is refused as growth: the file held no disk before
    assert (response.status_code, response.json()["error"]) == (507, "workspace_quota_exceeded")
    assert os.stat(workspace_dir(item.pk) / "holes.bin").st_size == 10 * GIB


# --- Hostile names and depths -----------------------------------------------------------------


def test_a_file_named_with_a_newline_is_listed_opened_and_deleted(alice_api, client, make_item):
    # Given sandbox code made a file whose name holds a newline
    item = make_item(files={"evil\nname.txt": b"payload"})
    # When alice opens the item page, downloads the file and deletes it from the page
    page = client.get(item_url(item), **HTML)
    downloaded = alice_api.get(item_url(item, "/files/evil%0Aname.txt"))
    deleted = client.post(item_url(item, "/files/evil%0Aname.txt"), {"action": "delete"}, **HTML)
    # Then the page lists it, the download has its bytes, and the delete removes it
    assert page.status_code == 200
    assert "evil%0Aname.txt" in page.content.decode()
    assert b"".join(downloaded.streaming_content) == b"payload"
    assert deleted.status_code == 302
    assert list(workspace_dir(item.pk).iterdir()) == []


def test_a_file_named_with_a_newline_is_deleted_through_the_api(alice_api, make_item):
    # Given a file whose name holds a newline
    item = make_item(files={"line\nbreak": b"x"})
    # When alice deletes it through the API / Then it is gone
    assert alice_api.delete(item_url(item, "/files/line%0Abreak")).status_code == 200
    assert list(workspace_dir(item.pk).iterdir()) == []


def test_a_name_that_is_not_utf8_is_listed_escaped(alice_api, client, make_item):
    # Given sandbox code made a file whose name is the bytes ff fe
    item = make_item()
    with open(os.path.join(os.fsencode(workspace_dir(item.pk)), b"bad\xff\xfe"), "wb") as handle:
        handle.write(b"x")
    # When alice lists the files and opens the item page
    listed = alice_api.get(item_url(item, "/files"))
    page = client.get(item_url(item), **HTML)
    # Then both answer, naming the file with its bytes escaped
    assert listed.status_code == 200
    assert [entry["path"] for entry in listed.json()] == ["bad\\xff\\xfe"]
    assert page.status_code == 200


@pytest.fixture
def deep_item(make_item):
    """alice's notebook holding 1500 nested folders `d/d/.../d` with a file at the bottom."""
    item = make_item()
    root = workspace_dir(item.pk)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as handle:
        handle.write(b"old at the bottom")
    os.close(fd)
    yield item
    # Python's own rmtree recurses, and would fail on this at the end of the session.
    subprocess.run(["rm", "-rf", str(root)], check=True)


def test_1500_nested_folders_list_and_measure(alice_api, client, deep_item):
    # Given 1500 nested folders
    # When alice lists the files and opens the item page
    listed = alice_api.get(item_url(deep_item, "/files"))
    page = client.get(item_url(deep_item), **HTML)
    # Then both answer, and the measurement reaches the file at the bottom
    assert (listed.status_code, page.status_code) == (200, 200)
    assert workspace_bytes(workspace_dir(deep_item.pk)) == len(b"old at the bottom")


def test_a_batch_over_1500_nested_folders_answers(alice_api, deep_item):
    # Given 1500 nested folders
    # When alice replaces text across the workspace
    response = _batch(alice_api, deep_item, {"op": "replace", "search": "old", "replace": "new"})
    # Then the batch answers instead of failing halfway through its walk
    assert response.status_code == 200, response.content


def test_an_item_whose_workspace_nests_1500_folders_is_deleted_with_it(deep_item, django_capture_on_commit_callbacks):
    # Given 1500 nested folders in alice's notebook
    # When staff delete the item
    with django_capture_on_commit_callbacks(execute=True):
        assert items_delete(item_ids=[deep_item.pk]) == 1
    # Then its workspace is gone with it
    assert not workspace_dir(deep_item.pk).exists()


# --- Who may read a workspace on the host ---------------------------------------------------


def test_workspaces_are_private_to_their_owner_on_the_host(alice_api, make_item):
    # Given a file and a folder written through the file API
    item = make_item()
    assert _put(alice_api, item, "notes/a.txt", b"secret").status_code == 200
    root = item_workspace_root(item)
    # When their modes are read
    modes = {
        "workspaces": root.parent.stat().st_mode & 0o777,
        "workspace": root.stat().st_mode & 0o777,
        "folder": (root / "notes").stat().st_mode & 0o777,
        "file": (root / "notes" / "a.txt").stat().st_mode & 0o777,
    }
    # Then others may only pass through the workspaces folder, and nothing else
    assert modes == {"workspaces": 0o711, "workspace": 0o700, "folder": 0o700, "file": 0o600}


def test_a_workspace_sandbox_code_opened_up_is_private_again_at_its_next_use(alice_api, make_item):
    # Given sandbox code made alice's workspace readable by everyone (it owns it)
    item = make_item()
    root = item_workspace_root(item)
    root.chmod(0o755)
    # When the workspace is next used / Then it is the owner's alone again
    assert alice_api.get(item_url(item, "/files")).status_code == 200
    assert root.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another local user needs root")
def test_another_local_user_can_neither_list_nor_read_a_workspace(alice_api, make_item):
    # Given a file written through the file API, in a workspace the sandbox made world-readable inside
    item = make_item()
    assert _put(alice_api, item, "a.txt", b"secret").status_code == 200
    root = item_workspace_root(item)
    (root / "a.txt").chmod(0o644)
    # When another local user lists the workspace and reads the file
    attempts = [
        subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv],
            capture_output=True,
            check=False,
        )
        for argv in (["ls", str(root)], ["cat", str(root / "a.txt")], ["ls", str(root.parent)])
    ]
    # Then every attempt is refused
    assert [attempt.returncode for attempt in attempts] == [2, 1, 2]
    assert all(b"Permission denied" in attempt.stderr for attempt in attempts)
