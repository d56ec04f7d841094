"""The file store: byte-exact round trips, atomic writes, path escapes, the write-check hook, batches."""

from __future__ import annotations

import os

import pytest

from collab.errors import DomainError, QuotaExceeded
from tests.fixtures.items import item_url
from workspace.sandboxes import filestore
from workspace.sandboxes.filestore import register_write_check, unregister_write_check, workspace_dir

pytestmark = pytest.mark.django_db
BINARY = bytes(range(256)) * 64 + b"\x00\xff\r\n"


@pytest.fixture
def item(make_item):
    return make_item()


@pytest.fixture
def refusing_check():
    """A write check that refuses all growth, as the disk quota will."""
    seen = []

    def refuse(intent):
        seen.append(intent)
        raise QuotaExceeded(error="workspace_quota_exceeded", detail="full", attempted=intent.attempted)

    register_write_check(refuse)
    yield seen
    unregister_write_check(refuse)


def _put(api, item, path, data: bytes):
    return api.put(item_url(item, f"/files/{path}"), data, content_type="application/octet-stream")


def test_binary_file_round_trips_byte_for_byte(alice_api, item):
    # Given alice's notebook
    # When she writes every byte value to data/blob.bin, in a folder not made yet / Then it is stored
    assert _put(alice_api, item, "data/blob.bin", BINARY).status_code == 200
    # When she downloads it
    response = alice_api.get(item_url(item, "/files/data/blob.bin"))
    # Then the bytes come back exactly
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == BINARY


def test_a_write_reports_old_and_new_size(alice_api, item):
    # Given alice's a.txt of five bytes
    _put(alice_api, item, "a.txt", b"12345")
    # When she overwrites it with two / Then the reply reports both sizes
    assert _put(alice_api, item, "a.txt", b"12").json() == {"path": "a.txt", "old_size": 5, "new_size": 2}


def test_a_file_write_costs_one_query_and_no_ledger_write(alice_api, item, django_assert_max_num_queries):
    # Given alice's notebook, with the owner's limits already read once
    _put(alice_api, item, "warm.txt", b"w")  # warms the quota layer's 5 s memo of the owner's limits
    # When she writes a file / Then it costs one query and writes no ledger row
    with django_assert_max_num_queries(1):
        assert _put(alice_api, item, "notes.txt", b"hello").status_code == 200


def test_listing_shows_files_and_folders(alice_api, item):
    # Given alice's src/main.py
    _put(alice_api, item, "src/main.py", b"print(1)\n")
    # When she lists the files
    body = alice_api.get(item_url(item, "/files")).json()
    # Then the folder and the file come back, each with its size and kind
    assert [(row["path"], row["size"], row["is_dir"]) for row in body] == [("src", 0, True), ("src/main.py", 9, False)]


def test_deleting_a_file_removes_it(alice_api, item):
    # Given alice's gone.txt
    _put(alice_api, item, "gone.txt", b"x")
    # When she deletes it / Then its new size is zero
    assert alice_api.delete(item_url(item, "/files/gone.txt")).json()["new_size"] == 0
    # Then it cannot be read any more
    assert alice_api.get(item_url(item, "/files/gone.txt")).status_code == 404


def test_a_missing_file_is_404(alice_api, item):
    # Given alice's notebook
    # When she reads a file that does not exist
    response = alice_api.get(item_url(item, "/files/nothing.txt"))
    # Then it is 404 file_not_found
    assert (response.status_code, response.json()["error"]) == (404, "file_not_found")


@pytest.mark.parametrize("path", ["../escape.txt", "a/../../escape.txt", "%2Fetc%2Fpasswd"])
def test_paths_that_climb_out_or_are_absolute_are_400_invalid_path(alice_api, item, path):
    # Given alice's notebook
    # When she writes to a path that climbs out or is absolute
    response = _put(alice_api, item, path, b"x")
    # Then it is refused: 400 invalid_path, or 404 where no route matches
    assert response.status_code in (400, 404)
    if response.status_code == 400:
        assert response.json()["error"] == "invalid_path"


def test_dotdot_and_absolute_paths_are_refused_by_the_resolver(item):
    # Given alice's notebook
    # When the resolver meets a climbing, absolute, empty or backslashed path / Then each is invalid_path
    for path in ("..", "../x", "a/../../x", "/etc/passwd", "", "a\\b"):
        with pytest.raises(DomainError) as refused:
            filestore.resolve(workspace_dir(item.pk), path)
        assert refused.value.error == "invalid_path"


def test_a_symlink_pointing_out_of_the_workspace_is_400(alice_api, item, tmp_path):
    # Given alice's notebook whose workspace holds a symlink to a folder outside it
    outside = tmp_path / "outside"
    outside.mkdir()
    root = workspace_dir(item.pk)
    root.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, root / "link")
    # When she writes through the symlink
    response = _put(alice_api, item, "link/owned.txt", b"x")
    # Then it is 400 invalid_path and nothing lands outside
    assert (response.status_code, response.json()["error"]) == (400, "invalid_path")
    assert not (outside / "owned.txt").exists()
    # Then reading through it is 400 too
    assert alice_api.get(item_url(item, "/files/link/owned.txt")).status_code == 400


def test_someone_elses_files_are_404(bob_api, item):
    # Given alice's notebook
    # When bob writes a file in it / Then it is 404
    assert _put(bob_api, item, "x.txt", b"x").status_code == 404
    # When he lists its files / Then it is 404 too
    assert bob_api.get(item_url(item, "/files")).status_code == 404


def test_a_refused_new_file_is_not_created(alice_api, item, refusing_check):
    # Given a write check that refuses all growth
    # When alice writes a new file / Then it is 507
    assert _put(alice_api, item, "new.txt", b"small").status_code == 507
    # Then no file is created
    assert list(workspace_dir(item.pk).iterdir()) == []


def test_a_refused_write_leaves_the_old_file_byte_for_byte(alice_api, item, refusing_check):
    # Given alice's keep.txt, and a write check that refuses all growth
    path = workspace_dir(item.pk) / "keep.txt"
    path.write_bytes(b"original")
    # When she overwrites it with longer content
    response = _put(alice_api, item, "keep.txt", b"original and much longer")
    # Then it is 507 and the old file is byte for byte as it was, with no temp file left
    assert (response.status_code, response.json()["error"]) == (507, "workspace_quota_exceeded")
    assert path.read_bytes() == b"original"
    assert [entry.name for entry in path.parent.iterdir()] == ["keep.txt"]  # no temp file left behind


def test_shrinking_same_size_and_delete_pass_even_when_checks_refuse(alice_api, item, refusing_check):
    # Given alice's 10-byte big.txt, and a write check that refuses all growth
    path = workspace_dir(item.pk) / "big.txt"
    path.write_bytes(b"0123456789")
    # When she overwrites it with as many bytes, then with fewer, then deletes it / Then each passes
    assert _put(alice_api, item, "big.txt", b"abcdefghij").status_code == 200
    assert _put(alice_api, item, "big.txt", b"abc").status_code == 200
    assert alice_api.delete(item_url(item, "/files/big.txt")).status_code == 200
    # Then the check was never asked
    assert refusing_check == []


def test_the_write_check_sees_the_item_owner_and_sizes(alice_api, make_item):
    # Given an item alice created and bob pays for, and a write check that records what it sees
    item = make_item(owner="bob")
    seen = []
    register_write_check(seen.append)
    try:
        # When alice writes five bytes in it
        _put(alice_api, item, "f.txt", b"12345")
    finally:
        unregister_write_check(seen.append)
    # Then the check saw one write of five bytes to that notebook, owed by bob
    (intent,) = seen
    written = intent.workspace
    assert (written.workspace_id, written.app_slug, written.payer, intent.delta) == (
        item.pk,
        "notebook",
        "bob",
        5,
    )


def test_an_oversized_upload_is_413_and_leaves_nothing(alice_api, item, settings):
    # Given a largest file of 10 bytes
    settings.WORKSPACE_MAX_FILE_BYTES = 10
    # When alice uploads 11
    response = _put(alice_api, item, "big.bin", b"x" * 11)
    # Then it is 413 file_too_large and nothing is stored
    assert (response.status_code, response.json()["error"]) == (413, "file_too_large")
    assert list(workspace_dir(item.pk).iterdir()) == []


def test_batch_copies_a_folder_replaces_text_and_stages_inputs(alice_api, item):
    # Given alice's src folder with two python files
    _put(alice_api, item, "src/a.py", b"name = 'old'\n")
    _put(alice_api, item, "src/b.py", b"print('old')\n")
    # When she sends a batch that copies the folder, replaces old with new in src and stages a binary input
    operations = [
        {"op": "copy", "from": "src", "to": "backup"},
        {"op": "replace", "search": "old", "replace": "new", "glob": "src/*"},
        {"op": "stage", "path": "inputs/data.bin", "content_base64": "AAEC"},
    ]
    response = alice_api.post(item_url(item, "/files:batch"), {"operations": operations}, format="json")
    # Then the copy keeps the old text, the source has the new one and the input holds its bytes
    assert response.status_code == 200, response.content
    root = workspace_dir(item.pk)
    assert (root / "backup/a.py").read_text() == "name = 'old'\n"
    assert (root / "src/b.py").read_text() == "print('new')\n"
    assert (root / "inputs/data.bin").read_bytes() == b"\x00\x01\x02"


def test_a_glob_longer_than_its_limit_is_refused_without_being_matched(alice_api, item):
    # Given alice's file src/a.py
    _put(alice_api, item, "src/a.py", b"name = 'old'\n")
    # When she sends a replace whose glob is 10^5 `[` (turning it into a pattern took minutes)
    operation = {"op": "replace", "search": "old", "replace": "new", "glob": "[" * 100_000}
    response = alice_api.post(item_url(item, "/files:batch"), {"operations": [operation]}, format="json")
    # Then it is 400 naming the limit, and the file is unchanged
    assert (response.status_code, response.json()["error"]) == (400, "invalid_batch")
    assert "at most 256 characters" in response.json()["detail"]
    assert (workspace_dir(item.pk) / "src/a.py").read_text() == "name = 'old'\n"


def test_a_batch_passes_the_write_check_once_and_is_refused_whole(alice_api, item, refusing_check):
    # Given a write check that refuses all growth
    # When alice sends a batch staging two files
    operations = [{"op": "stage", "path": "a.txt", "content": "aaa"}, {"op": "stage", "path": "b.txt", "content": "b"}]
    response = alice_api.post(item_url(item, "/files:batch"), {"operations": operations}, format="json")
    # Then it is 507, the check was asked once for both files' bytes, and nothing is written
    assert response.status_code == 507
    assert len(refusing_check) == 1
    assert refusing_check[0].delta == 4
    assert not (workspace_dir(item.pk) / "a.txt").exists()


@pytest.mark.parametrize(
    "operations",
    [[], [{"op": "explode"}], [{"op": "stage", "path": "../x", "content": "x"}], [{"op": "copy", "from": "a"}]],
)
def test_bad_batches_are_400_and_change_nothing(alice_api, item, operations):
    # Given alice's empty notebook
    # When she sends an empty batch, an unknown op, a path that climbs out or a copy with no target
    response = alice_api.post(item_url(item, "/files:batch"), {"operations": operations}, format="json")
    # Then it is 400 and the workspace stays empty
    assert response.status_code == 400
    assert not workspace_dir(item.pk).exists() or list(workspace_dir(item.pk).iterdir()) == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json"])
def test_a_file_put_labelled_as_another_media_type_is_refused_and_writes_nothing(alice_api, make_item, content_type):
    # Given alice's notebook
    item = make_item()
    # When she PUTs bytes labelled other than application/octet-stream
    response = alice_api.put(item_url(item, "/files/notes.txt"), b"hello", content_type=content_type)
    # Then the answer is 415 saying what to send, and no file was written
    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"
    assert "application/octet-stream" in response.json()["detail"]
    assert alice_api.get(item_url(item, "/files/notes.txt")).status_code == 404


@pytest.mark.parametrize("content_type", ["application/octet-stream", "application/octet-stream; charset=binary", ""])
def test_a_file_put_as_octet_stream_or_unlabelled_is_written(alice_api, make_item, content_type):
    # Given alice's notebook / When she PUTs bytes as the document says, or with no Content-Type
    item = make_item()
    response = alice_api.generic("PUT", item_url(item, "/files/notes.txt"), b"hello", content_type=content_type)
    # Then they are written
    assert response.status_code == 200
    assert b"".join(alice_api.get(item_url(item, "/files/notes.txt")).streaming_content) == b"hello"


def test_a_stranger_putting_a_wrongly_labelled_file_hears_not_found(bob_api, make_item):
    # Given alice's notebook / When bob PUTs a file labelled text/plain into it
    item = make_item()
    response = bob_api.put(item_url(item, "/files/notes.txt"), b"x", content_type="text/plain")
    # Then he hears it does not exist, as for any request of his there
    assert response.status_code == 404
