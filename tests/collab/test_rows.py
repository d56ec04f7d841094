"""collab.rows as requests run it (each in transactions of its own, not inside a test's): a
pipelined transaction sends its statements as one batch, in the order they were written, and
rolls back whole; a planned statement is prepared once per PostgreSQL session and answers as
the statement itself."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from collab.models import InboxVersion
from collab.rows import PlannedStatement, answer_later, execute, pipelined_transaction
from tests.fixtures.items import connection_at_rest

pytestmark = [
    pytest.mark.usefixtures("transactional_db"),
    pytest.mark.postgres(reason="a pipelined transaction and prepared statements are PostgreSQL's"),
]
_TABLE = InboxVersion._meta.db_table
_INSERT = f"INSERT INTO {_TABLE} (recipient, version) VALUES (%s, %s) RETURNING recipient, version"
_VERSION_OF = PlannedStatement("tests_version_of", f"SELECT version FROM {_TABLE} WHERE recipient = %s")
_COUNT = PlannedStatement("tests_count", f"SELECT COUNT(*) FROM {_TABLE}")


def _versions() -> dict[str, int]:
    return dict(InboxVersion.objects.values_list("recipient", "version"))


def test_a_pipelined_transactions_statements_reach_the_server_as_one_batch_when_it_ends():
    # Given a pipelined transaction that writes two rows and reads neither answer inside it
    with CaptureQueriesContext(connection) as sent, pipelined_transaction(connection, durable=False):
        first = answer_later(_INSERT, ["alice", 1], connection=connection)
        second = answer_later(_INSERT, ["bob", 2], connection=connection)
        execute(connection, "COMMIT")
        # When nothing has asked for an answer yet / Then nothing has been sent
        assert sent.captured_queries == []
    # Then BEGIN, both writes and the COMMIT went as one statement string, and both answers are read after it
    assert len(sent.captured_queries) == 1
    assert first() == ("alice", 1)
    assert second() == ("bob", 2)
    assert _versions() == {"alice": 1, "bob": 2}
    assert connection_at_rest()


def test_a_reader_called_inside_sends_what_was_queued_before_it_in_one_round_trip():
    # Given a pipelined transaction with two writes queued
    with CaptureQueriesContext(connection) as sent, pipelined_transaction(connection, durable=True):
        first = answer_later(_INSERT, ["alice", 1], connection=connection)
        answer_later(_INSERT, ["bob", 2], connection=connection)
        # When the first write's answer is asked for inside the block
        assert first() == ("alice", 1)
        # Then both writes were sent, together
        assert len(sent.captured_queries) == 1
        execute(connection, "COMMIT")
    # And the COMMIT went alone at the end
    assert len(sent.captured_queries) == 2
    assert _versions() == {"alice": 1, "bob": 2}


def test_a_statement_of_the_orms_inside_runs_after_what_was_queued_before_it():
    # Given a pipelined transaction with a write queued
    with pipelined_transaction(connection, durable=False):
        execute(connection, _INSERT, ["alice", 1])
        # When the ORM reads inside the block / Then it sees the queued write (sent before it)
        seen = _versions()
        execute(connection, "COMMIT")
    assert seen == {"alice": 1}
    assert connection_at_rest()


def test_hostile_values_are_bound_as_values_in_a_batch():
    # Given values that would end a statement string or look like placeholders
    hostile = [
        "x'); DELETE FROM collab_inboxversion; --",
        "%s %% %(name)s",
        "back\\slash; COMMIT",
        "é\N{NO-BREAK SPACE}",
    ]
    # When each is written in one pipelined transaction
    with pipelined_transaction(connection, durable=False):
        answers = [
            answer_later(_INSERT, [value, number], connection=connection) for number, value in enumerate(hostile)
        ]
        execute(connection, "COMMIT")
    # Then each is stored exactly, as a value, and nothing else ran
    assert [answer()[0] for answer in answers] == hostile
    assert _versions() == {value: number for number, value in enumerate(hostile)}


def test_a_statement_that_fails_in_a_batch_rolls_it_all_back_and_every_answer_says_why():
    # Given alice's row
    InboxVersion.objects.create(recipient="alice", version=1)
    answers = []

    def write_then_duplicate() -> None:
        with pipelined_transaction(connection, durable=False):
            answers.append(answer_later(_INSERT, ["bob", 2], connection=connection))
            answers.append(answer_later(_INSERT, ["alice", 3], connection=connection))
            execute(connection, "COMMIT")

    # When a batch writes bob's row and then alice's again (a duplicate key)
    with pytest.raises(IntegrityError):
        write_then_duplicate()
    # Then neither was kept, each answer raises the failure, and the connection works on
    for answer in answers:
        with pytest.raises(IntegrityError):
            answer()
    assert _versions() == {"alice": 1}
    assert connection_at_rest()
    InboxVersion.objects.create(recipient="bob", version=2)
    assert _versions() == {"alice": 1, "bob": 2}


def test_a_block_that_raises_before_its_end_keeps_nothing_it_queued():
    # Given a pipelined transaction with a write queued
    def write_then_refuse() -> None:
        with pipelined_transaction(connection, durable=False):
            execute(connection, _INSERT, ["alice", 1])
            raise RuntimeError("refused")

    # When the block raises before it ends
    with pytest.raises(RuntimeError, match="refused"):
        write_then_refuse()
    # Then the write was never kept and the connection is at rest
    assert _versions() == {}
    assert connection_at_rest()


def test_an_atomic_block_opened_inside_before_anything_was_sent_is_refused_with_nothing_written():
    # Given a pipelined transaction with a write queued (nothing sent yet)
    def write_then_atomic() -> None:
        with pipelined_transaction(connection, durable=False):
            execute(connection, _INSERT, ["alice", 1])
            with transaction.atomic():
                InboxVersion.objects.create(recipient="bob", version=2)

    # When code in the block opens an atomic block and writes with the ORM
    # Then it is refused loudly, neither write is kept, and the connection is at rest
    with pytest.raises(TransactionManagementError, match="atomic"):
        write_then_atomic()
    assert _versions() == {}
    assert connection_at_rest()


def test_a_reader_asked_after_its_block_failed_says_so_and_sends_nothing():
    # Given a pipelined transaction that queued a write and then raised, its reader kept
    kept = []

    def write_then_refuse() -> None:
        with pipelined_transaction(connection, durable=False):
            kept.append(answer_later(_INSERT, ["alice", 1], connection=connection))
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        write_then_refuse()
    # When the reader is asked afterwards (a `finally` giving back what it claimed)
    # Then it raises, nothing was written, and no transaction was begun on the connection
    with pytest.raises(TransactionManagementError, match="failed before it was sent"):
        kept[0]()
    assert _versions() == {}
    assert connection_at_rest()


def test_an_atomic_block_around_queued_statements_inside_is_refused():
    # Given a pipelined transaction in which an atomic block opens before anything was sent
    def atomic_around_a_queued_write() -> None:
        with pipelined_transaction(connection, durable=False), transaction.atomic():
            execute(connection, _INSERT, ["alice", 1])

    # When a statement is queued in it / Then it is refused (the atomic's rollback could not undo it)
    with pytest.raises(TransactionManagementError, match="atomic"):
        atomic_around_a_queued_write()
    assert _versions() == {}
    assert connection_at_rest()


def test_a_pipelined_transaction_inside_another_is_refused_with_nothing_written():
    # Given a pipelined transaction with a write queued
    def nested() -> None:
        with pipelined_transaction(connection, durable=False):
            execute(connection, _INSERT, ["alice", 1])
            with pipelined_transaction(connection, durable=False):
                execute(connection, _INSERT, ["bob", 2])

    # When another opens inside it / Then it is refused (its COMMIT would commit the outer's writes)
    with pytest.raises(TransactionManagementError, match="inside another"):
        nested()
    assert _versions() == {}
    assert connection_at_rest()


def test_a_planned_statement_without_parameters_runs():
    # Given two rows and a planned statement with no placeholder
    InboxVersion.objects.create(recipient="alice", version=1)
    InboxVersion.objects.create(recipient="bob", version=2)
    # When it runs / Then it answers as the statement itself
    assert _COUNT.fetch_one([], connection=connection) == (2,)


def test_a_planned_statement_answers_as_the_statement_itself():
    # Given alice's row
    InboxVersion.objects.create(recipient="alice", version=7)
    # When it is read by a planned statement, and a name nobody has
    # Then the rows are the statement's own, on either database
    assert _VERSION_OF.fetch_one(["alice"], connection=connection) == (7,)
    assert _VERSION_OF.fetch_one(["nobody' OR '1'='1"], connection=connection) is None


def test_a_planned_statement_is_prepared_once_per_session_and_again_on_a_new_connection():
    # Given alice's row and a fresh connection
    InboxVersion.objects.create(recipient="alice", version=7)
    connection.close()
    # When it is read three times, then once more after the connection was replaced
    with CaptureQueriesContext(connection) as first_session:
        for _ in range(3):
            assert _VERSION_OF.fetch_one(["alice"], connection=connection) == (7,)
    connection.close()
    with CaptureQueriesContext(connection) as second_session:
        assert _VERSION_OF.fetch_one(["alice"], connection=connection) == (7,)
    # Then each session prepared it once, before its first use
    sent = [query["sql"].split(" ", 1)[0] for query in first_session.captured_queries]
    assert sent == ["PREPARE", "EXECUTE", "EXECUTE", "EXECUTE"]
    assert [query["sql"].split(" ", 1)[0] for query in second_session.captured_queries] == ["PREPARE", "EXECUTE"]


def test_a_planned_statement_outlives_a_rolled_back_transaction():
    # Given a transaction that prepared the statement, then failed and rolled back
    InboxVersion.objects.create(recipient="alice", version=7)
    connection.close()

    def read_then_fail() -> None:
        with transaction.atomic():
            _VERSION_OF.fetch_one(["alice"], connection=connection)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        read_then_fail()
    # When it is read again / Then the session still has it: no second PREPARE
    with CaptureQueriesContext(connection) as sent:
        assert _VERSION_OF.fetch_one(["alice"], connection=connection) == (7,)
    assert [query["sql"].split(" ", 1)[0] for query in sent.captured_queries] == ["EXECUTE"]


def test_with_prepared_statements_off_a_planned_statement_is_sent_as_itself(settings):
    # Given prepared statements turned off (a pooler in transaction mode) and alice's row
    settings.WORKSPACE_DATABASE_PREPARED_STATEMENTS = False
    InboxVersion.objects.create(recipient="alice", version=7)
    # When it is read
    with CaptureQueriesContext(connection) as sent:
        assert _VERSION_OF.fetch_one(["alice"], connection=connection) == (7,)
    # Then the statement itself went, nothing prepared
    assert [query["sql"].split(" ", 1)[0] for query in sent.captured_queries] == ["SELECT"]


def test_a_planned_statement_with_a_percent_of_its_own_or_a_taken_name_is_refused_when_defined():
    # When a statement has a % that is not a placeholder, or reuses another's name
    # Then it is refused at once, before anything could run it
    with pytest.raises(ValueError, match="placeholders"):
        PlannedStatement("tests_percent", f"SELECT version FROM {_TABLE} WHERE recipient LIKE 'a%'")
    with pytest.raises(ValueError, match="another planned statement"):
        PlannedStatement("tests_version_of", f"SELECT recipient FROM {_TABLE}")
