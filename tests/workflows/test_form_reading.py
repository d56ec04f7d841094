"""Reading the workflow form and showing a definition: intervals in units, step comparisons, newest runs."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from workspace.workflows.definitions import workflow_definition
from workspace.workflows.forms import FormProblem, WorkflowForm
from workspace.workflows.models import WorkflowRun
from workspace.workflows.rules import schedule_in_units, schedule_text
from workspace.workflows.selectors import STEP_DIFF_LIMIT, last_runs, step_lines


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(60, (1, "minutes")), (90, (90, "seconds")), (7200, (2, "hours")), (86_400 * 31, (31, "days"))],
)
def test_an_interval_is_shown_in_the_largest_unit_that_divides_it(seconds, shown):
    # Given an interval in seconds
    # When it is put in units / Then the largest exact unit is chosen
    assert schedule_in_units(seconds) == shown


@pytest.mark.parametrize(("seconds", "text"), [(3600, "every hour"), (5400, "every 90 minutes"), (None, "")])
def test_an_interval_reads_as_a_person_says_it(seconds, text):
    # Given an interval (or none) / When it is shown / Then it reads naturally
    assert schedule_text(seconds) == text


def test_a_definition_read_into_the_form_gives_back_the_same_data(make_workflow, make_item):
    # Given alice's workflow every 90 minutes on her notebook, paused
    item = make_item()
    workflow_id = make_workflow(
        ["ls", "du -sh ."], name="n", description="d", item_id=str(item.pk), every_seconds=5400, enabled=False
    )
    definition = workflow_definition(workflow_id)
    # When it fills the form, which is read back unchanged
    data = WorkflowForm.from_definition(definition).data()
    # Then the data is the stored one
    assert data == {
        "name": "n", "description": "d", "steps": ["ls", "du -sh ."],
        "item_id": str(item.pk), "every_seconds": 5400, "enabled": False,
    }  # fmt: skip


def test_an_unknown_unit_is_a_problem_of_the_schedule():
    # Given a form whose unit is not one the page offers
    form = WorkflowForm.from_post(QueryDict("name=n&steps=ls&every=3&every_unit=fortnights"))
    # When it is read / Then the schedule is named as the problem
    with pytest.raises(FormProblem) as problem:
        form.data()
    assert list(problem.value.fields) == ["every_seconds"]


def test_the_step_comparison_marks_what_each_side_alone_holds():
    # Given the current steps and an earlier revision's
    current, earlier = ["fetch", "transform", "publish"], ["fetch", "report"]
    # When they are compared
    lines = [(line.mark, line.text) for line in step_lines(current, earlier)]
    # Then shared steps are unmarked, the current's own marked -, the earlier's own +
    assert lines == [(" ", "fetch"), ("-", "transform"), ("-", "publish"), ("+", "report")]


def test_step_lists_longer_than_the_comparison_diffs_are_lined_up_step_by_step():
    # Found attacking the revision page: a line diff costs the square of the steps (difflib), so a
    # workflow of a few thousand steps held a worker for seconds on every view (bench/workflow_pages.py).
    # Given a current revision one step longer than the comparison diffs, and an earlier one without its first step
    current = [f"echo {number}" for number in range(STEP_DIFF_LIMIT + 1)]
    earlier = current[1:]

    # When they are compared
    lines = [(line.mark, line.text) for line in step_lines(current, earlier)]

    # Then each step is compared with the one at its place: every place differs, the current's
    # step then the earlier's, and the current's last step stands alone
    assert lines[:4] == [("-", "echo 0"), ("+", "echo 1"), ("-", "echo 1"), ("+", "echo 2")]
    assert lines[-1] == ("-", f"echo {STEP_DIFF_LIMIT}")
    assert len(lines) == 2 * len(earlier) + 1


@pytest.mark.django_db
def test_last_runs_gives_the_newest_run_of_each_workflow_in_one_query(make_item, django_assert_num_queries):
    # Given two workflows' runs, three and one, and a workflow never run
    item = make_item()
    runs = [
        WorkflowRun.objects.create(workflow_id=workflow_id, item=item, trigger="manual", status=status)
        for workflow_id, status in [("a", "failed"), ("a", "failed"), ("b", "succeeded"), ("a", "succeeded")]
    ]
    # When the newest of each is asked for
    with django_assert_num_queries(1):
        newest = last_runs(["a", "b", "never"])
    # Then it is each one's latest run, and nothing for the one never run
    assert {workflow_id: run.pk for workflow_id, run in newest.items()} == {"a": runs[3].pk, "b": runs[2].pk}
