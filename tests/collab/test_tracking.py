"""The shared tracking fields: creator and last editor, with the injectable clock's times."""

from __future__ import annotations

from collab.models import Notification


def test_stamp_created_records_the_creator_and_both_times(clock) -> None:
    # Given a new notification row
    row = Notification(recipient="bob", kind="mention", title="t")

    # When alice is stamped as its creator
    row.stamp_created("alice")

    # Then she is its creator and last editor, and both times are now
    assert (row.created_by, row.updated_by) == ("alice", "alice")
    assert row.created_at == row.updated_at == clock.now()


def test_stamp_updated_keeps_the_creator_and_moves_the_update_time(clock) -> None:
    # Given a row alice created, and three minutes later
    row = Notification(recipient="bob", kind="mention", title="t")
    row.stamp_created("alice")
    created = row.created_at
    clock.advance(minutes=3)

    # When carol is stamped as its editor
    row.stamp_updated("carol")

    # Then alice stays its creator, carol is its last editor and only the update time moves
    assert (row.created_by, row.updated_by) == ("alice", "carol")
    assert row.created_at == created
    assert row.updated_at == clock.now()


def test_work_off_the_request_path_records_an_explicit_user(clock) -> None:
    # Given a new row made by work off the request path (a task, a command)
    row = Notification(recipient="bob", kind="mention", title="t")

    # When it is stamped with no user
    row.stamp_created(None)

    # Then no creator is recorded rather than a made-up one
    assert row.created_by == ""
