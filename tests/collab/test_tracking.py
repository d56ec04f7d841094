"""The shared tracking fields: creator and last editor, with the injectable clock's times."""

from __future__ import annotations

from collab.models import Notification


def test_stamp_created_records_the_creator_and_both_times(clock) -> None:
    row = Notification(recipient="bob", kind="mention", title="t")

    row.stamp_created("alice")

    assert (row.created_by, row.updated_by) == ("alice", "alice")
    assert row.created_at == row.updated_at == clock.now()


def test_stamp_updated_keeps_the_creator_and_moves_the_update_time(clock) -> None:
    row = Notification(recipient="bob", kind="mention", title="t")
    row.stamp_created("alice")
    created = row.created_at
    clock.advance(minutes=3)

    row.stamp_updated("carol")

    assert (row.created_by, row.updated_by) == ("alice", "carol")
    assert row.created_at == created
    assert row.updated_at == clock.now()


def test_work_off_the_request_path_records_an_explicit_user(clock) -> None:
    row = Notification(recipient="bob", kind="mention", title="t")

    row.stamp_created(None)

    assert row.created_by == ""
