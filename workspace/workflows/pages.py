"""Workflow pages: the list, the form that creates and edits one, its page (steps, run now, runs,
revisions), and a revision compared with the current one before switching back.

Every read and write goes through the selectors and services the `/api/v1/workflow` routes use,
with their access policy: someone else's workflow is the site's 404, and a refused save shows the
form again as it was typed, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from collab.actor import actor_of
from collab.capacity import runs_long
from collab.edge import refusal_page
from collab.errors import DomainError
from collab.web import identity_required
from crudgen import CrudError, NotFoundError, RevisionConflict
from workspace.items.access import usable_item_ids
from workspace.items.config import AppDescriptor
from workspace.items.models import Item
from workspace.items.web import with_item
from workspace.workflows import selectors, services
from workspace.workflows.access import DATA_REFUSALS
from workspace.workflows.definitions import (
    WorkflowDefinition,
    definitions_page,
    revision_for,
    revisions_page,
    workflow_for,
)
from workspace.workflows.forms import WorkflowForm
from workspace.workflows.rules import SCHEDULE_UNITS

Refusal = DomainError | CrudError
# A save the page shows again as typed, saying why: crudgen's refusals, the policy's (a form
# problem is one of those: `FormProblem` is `Invalid`).
SAVE_REFUSALS = (CrudError, *DATA_REFUSALS)
# The form's fields as a person knows them, and the control each one's message leads to; the
# messages of a refused save name the API's fields (crudgen names nested ones `steps[0]`).
FORM_FIELDS = {
    "name": ("Name", "wf-name"),
    "description": ("Description", "wf-description"),
    "steps": ("Steps", "wf-step-1"),
    "item_id": ("Item", "wf-item"),
    "every_seconds": ("Schedule", "wf-every"),
    "enabled": ("Enabled", "wf-enabled"),
}


@dataclass(frozen=True)
class FieldError:
    field: str
    label: str
    message: str
    anchor: str


def _page_number(raw: str | None) -> int:
    return int(raw) if raw and raw.isdigit() and 0 < len(raw) <= 6 and int(raw) > 0 else 1


def _workflow_or_404(request: HttpRequest, workflow_id: str) -> WorkflowDefinition:
    try:
        return workflow_for(workflow_id, actor=actor_of(request))
    except DomainError as exc:
        raise Http404(str(exc.detail)) from exc


def _workflow_url(workflow_id: str) -> str:
    return reverse("workflow", args=[workflow_id])


def _field_errors(refusal: Refusal) -> list[FieldError]:
    fields = getattr(refusal, "fields", None) or (getattr(refusal, "extra", None) or {}).get("fields") or {}
    found: dict[str, FieldError] = {}
    for key, message in fields.items():
        name = str(key).split("[", 1)[0].split(".", 1)[0]
        # A field the form does not show (none today) still reaches the summary, at the form's top.
        label, anchor = FORM_FIELDS.get(name, ("Workflow", "wf-name"))
        found.setdefault(name, FieldError(name, label, str(message), anchor))
    return list(found.values())


# -- the list -----------------------------------------------------------------------------------


@identity_required
def workflows_page(request: HttpRequest) -> HttpResponse:
    deleted = request.GET.get("deleted") == "1"
    listing = definitions_page(actor=actor_of(request), page=_page_number(request.GET.get("page")), deleted=deleted)
    ids = [definition.id for definition in listing.definitions]
    context = {
        "listing": listing,
        "deleted": deleted,
        "last_runs": selectors.last_runs(ids),
        "items": selectors.items_for_viewer((d.item_id for d in listing.definitions), actor=actor_of(request)),
    }
    return render(request, "workflows/workflows.html", context)


# -- create and edit ----------------------------------------------------------------------------


def _form_page(
    request: HttpRequest,
    form: WorkflowForm,
    *,
    workflow: WorkflowDefinition | None = None,
    edited_revision_id: str = "",
    refusal: Refusal | None = None,
) -> HttpResponse:
    field_errors = _field_errors(refusal) if refusal is not None else []
    context = {
        "form": form,
        "workflow": workflow,
        "edited_revision_id": edited_revision_id,
        "steps": [*form.filled_steps, ""],
        "units": list(SCHEDULE_UNITS),
        "item_groups": selectors.item_choices(actor=actor_of(request), named=[form.item_id]),
        "refusal": refusal,
        "field_errors": field_errors,
        "errors": {error.field: error.message for error in field_errors},
    }
    return refusal_page(request, "workflows/workflow_form.html", context, refusal)


@identity_required
def workflow_new_page(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _form_page(request, WorkflowForm(item_id=request.GET.get("item", "").strip()[:40]))
    form = WorkflowForm.from_post(request.POST)
    try:
        created = services.workflow_create(data=form.data(), actor=actor_of(request))
    except SAVE_REFUSALS as exc:
        return _form_page(request, form, refusal=exc)
    messages.success(request, f"Created {form.name.strip() or 'the workflow'}.")
    return HttpResponseRedirect(_workflow_url(created.resource_id))


@identity_required
def workflow_edit_page(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _workflow_or_404(request, workflow_id)
    if workflow.is_deleted:
        messages.error(request, "This workflow is deleted; restore it before you edit it.")
        return HttpResponseRedirect(_workflow_url(workflow_id))
    if request.method != "POST":
        return _form_page(
            request, WorkflowForm.from_definition(workflow), workflow=workflow, edited_revision_id=workflow.revision_id
        )
    form = WorkflowForm.from_post(request.POST)
    edited = request.POST.get("edited_revision_id", "")
    try:
        saved = services.workflow_update(
            workflow_id=workflow_id, data=form.data(), if_match=edited, actor=actor_of(request)
        )
    except NotFoundError as exc:
        raise Http404(exc.detail) from exc
    except SAVE_REFUSALS as exc:
        # After a conflict the form carries the newer revision: saving again replaces it knowingly.
        newer = exc.extra.get("current_revision_id", edited) if isinstance(exc, RevisionConflict) else edited
        return _form_page(request, form, workflow=workflow, edited_revision_id=newer, refusal=exc)
    if saved.current_revision_id == edited:
        messages.info(request, "Nothing changed, so no revision was added.")
    else:
        messages.success(request, f"Saved as revision {saved.current_revision_id}.")
    return HttpResponseRedirect(_workflow_url(workflow_id))


@identity_required
@require_POST
def workflow_delete_page(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _workflow_or_404(request, workflow_id)
    services.workflow_delete(workflow_id=workflow_id, actor=actor_of(request))
    messages.success(request, f"Deleted {workflow.name}: it no longer runs. Its history stays, and it can be restored.")
    return HttpResponseRedirect(f"{reverse('workflows')}?deleted=1")


@identity_required
@require_POST
def workflow_restore_page(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _workflow_or_404(request, workflow_id)
    try:
        services.workflow_restore(workflow_id=workflow_id, actor=actor_of(request))
    except CrudError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Restored {workflow.name}.")
    return HttpResponseRedirect(_workflow_url(workflow_id))


# -- one workflow: its steps, run now, runs and revisions ---------------------------------------


def _workflow_view(
    request: HttpRequest, workflow: WorkflowDefinition, *, run_item_id: str, refusal: DomainError | None = None
) -> HttpResponse:
    runs = selectors.runs_of_workflow(workflow_id=workflow.id)
    context = {
        "workflow": workflow,
        "items": selectors.items_for_viewer([workflow.item_id], actor=actor_of(request)),
        "run_item_id": run_item_id,
        "item_groups": selectors.item_choices(actor=actor_of(request), named=[run_item_id, workflow.item_id]),
        "runs": runs,
        "viewable_run_items": usable_item_ids((run.item for run in runs if run.item), actor=actor_of(request)),
        "revisions": revisions_page(
            workflow.id, actor=actor_of(request), page=_page_number(request.GET.get("revisions"))
        ),
        "refusal": refusal,
    }
    return refusal_page(request, "workflows/workflow.html", context, refusal)


@identity_required
def workflow_page(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = _workflow_or_404(request, workflow_id)
    run_item_id = request.GET.get("item", "").strip()[:40] or workflow.item_id or ""
    return _workflow_view(request, workflow, run_item_id=run_item_id)


@runs_long
@identity_required
@require_POST
def workflow_run_page(request: HttpRequest, workflow_id: str) -> HttpResponse:
    """Run now: the gated run of the API; a refusal (a 507 above all) shows on the page, readable."""
    workflow = _workflow_or_404(request, workflow_id)
    item_id = request.POST.get("item_id", "").strip()[:40]
    try:
        run = services.workflow_run_on_item(workflow_id=workflow_id, item_id=item_id, actor=actor_of(request))
    except DomainError as exc:
        return _workflow_view(request, workflow, run_item_id=item_id, refusal=exc)
    outcome = f"Run #{run.number} {run.get_status_display().lower()}."
    if run.reason:
        messages.error(request, f"{outcome} {run.reason}")
    else:
        messages.success(request, outcome)
    return HttpResponseRedirect(f"{_workflow_url(workflow_id)}?{urlencode({'item': item_id})}#run-{run.pk}")


# -- a revision compared with the current one, and switching back -------------------------------


def _revision_view(
    request: HttpRequest, workflow: WorkflowDefinition, revision_id: str, *, refusal: CrudError | None = None
) -> HttpResponse:
    try:
        revision = revision_for(workflow.id, revision_id, actor=actor_of(request))
    except DomainError as exc:
        raise Http404(str(exc.detail)) from exc
    context = {
        "workflow": workflow,
        "comparison": selectors.revision_comparison(workflow, revision, actor=actor_of(request)),
        "refusal": refusal,
    }
    return refusal_page(request, "workflows/revision.html", context, refusal)


@identity_required
def workflow_revision_page(request: HttpRequest, workflow_id: str, revision_id: str) -> HttpResponse:
    return _revision_view(request, _workflow_or_404(request, workflow_id), revision_id)


@identity_required
@require_POST
def workflow_switch_page(request: HttpRequest, workflow_id: str, revision_id: str) -> HttpResponse:
    """Switching back, confirmed on the comparison page; `compared_with` is the revision that was
    current there, so a switch over a change made since is refused (412) rather than blind."""
    workflow = _workflow_or_404(request, workflow_id)
    try:
        services.workflow_switch(
            workflow_id=workflow_id,
            revision_id=revision_id,
            if_match=request.POST.get("compared_with", ""),
            actor=actor_of(request),
        )
    except NotFoundError as exc:
        raise Http404(exc.detail) from exc
    except CrudError as exc:
        return _revision_view(request, _workflow_or_404(request, workflow_id), revision_id, refusal=exc)
    messages.success(
        request, f"Switched back to revision {revision_id}. Revision {workflow.revision_id} stays in the history."
    )
    return HttpResponseRedirect(_workflow_url(workflow_id))


# -- the workflow of an item (the item page's panel) --------------------------------------------


@identity_required
@with_item()
def item_workflow_page(request: HttpRequest, app: AppDescriptor, item: Item, workflow_id: str) -> HttpResponse:
    """The item's link to one workflow opens the workflow's page, ready to run on that item."""
    _workflow_or_404(request, workflow_id)
    return HttpResponseRedirect(f"{_workflow_url(workflow_id)}?item={item.pk}")
