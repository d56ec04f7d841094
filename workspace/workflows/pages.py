"""The workflow page of an item: the definition, a run button, the runs and the revision history."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from collab.errors import ApiError
from collab.web import identity_required
from workspace.items.access import item_for_viewer
from workspace.workflows import selectors
from workspace.workflows.definitions import workflow_definition


@identity_required
def workflow_page(request: HttpRequest, slug: str, item_id: int, workflow_id: str) -> HttpResponse:
    identity = request.identity
    app, item = item_for_viewer(slug, item_id, user_id=identity.user_id, is_staff=identity.is_staff)
    try:
        definition = workflow_definition(workflow_id, user_id=identity.user_id, is_staff=identity.is_staff)
    except ApiError as exc:
        if exc.status_code == 404:
            raise Http404(str(exc.detail)) from exc
        # Deleted: back to the item, saying why, rather than a bare error page.
        messages.error(request, str(exc.detail))
        return HttpResponseRedirect(reverse("ws-item", args=[slug, item_id]))
    context = {
        "app": app,
        "item": item,
        "workflow": definition,
        "runs": selectors.runs_of_workflow(workflow_id=definition.id, item_id=item.pk),
    }
    return render(request, "workflows/workflow.html", context)
