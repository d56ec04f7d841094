"""Workflow endpoints of an item: its runs of one workflow, and a gated manual run."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab.actor import actor_of
from collab.capacity import runs_long
from collab.serializers import ErrorOutputSerializer
from workspace.items.web import ItemApiView
from workspace.workflows import selectors, services
from workspace.workflows.definitions import workflow_definition
from workspace.workflows.serializers import WorkflowRunOutputSerializer, WorkflowRunsOutputSerializer

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer, 410: ErrorOutputSerializer}


class WorkflowRunListApi(ItemApiView):
    @extend_schema(responses={200: WorkflowRunsOutputSerializer, **_ERRORS})
    def get(self, request: Request, slug: str, item_id: int, workflow_id: str) -> Response:
        definition = workflow_definition(workflow_id, actor=actor_of(request))
        runs = selectors.runs_of_workflow(workflow_id=definition.id, item_id=self.item.pk)
        return Response(WorkflowRunsOutputSerializer({"workflow": definition, "runs": runs}).data)


@runs_long
class WorkflowRunApi(ItemApiView):
    """For the APIs that start commands: a refusal that says when to come back (429, a person's
    command slots all taken) carries Retry-After."""

    @extend_schema(
        request=None,
        responses={
            201: WorkflowRunOutputSerializer,
            429: ErrorOutputSerializer,
            500: ErrorOutputSerializer,
            503: ErrorOutputSerializer,
            507: ErrorOutputSerializer,
            **_ERRORS,
        },
    )
    def post(self, request: Request, slug: str, item_id: int, workflow_id: str) -> Response:
        run = services.workflow_run(item=self.item, app=self.app, workflow_id=workflow_id, actor=actor_of(request))
        return Response(WorkflowRunOutputSerializer(run).data, status=201)
