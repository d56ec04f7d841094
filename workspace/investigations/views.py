"""Investigation endpoints (docs/ARCHITECTURE.md §6); `/investigations/<id>` serves the page to browsers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab.actor import Actor, actor_of
from collab.api import ServiceApiView, created, location_header
from collab.serializers import ErrorOutputSerializer
from workspace.agent.serializers import ChatMessageOutputSerializer
from workspace.investigations import selectors, services
from workspace.investigations.access import InvestigationRight, investigation_for
from workspace.investigations.serializers import (
    InvestigationCreateInputSerializer,
    InvestigationDetailOutputSerializer,
    InvestigationMembersInputSerializer,
    InvestigationMentionInputSerializer,
    InvestigationOutputSerializer,
    InvestigationStatusInputSerializer,
)

_ERRORS = {400: ErrorOutputSerializer, 404: ErrorOutputSerializer}


def _detail(investigation_id: int, *, actor: Actor) -> dict[str, Any]:
    investigation = investigation_for(investigation_id, actor=actor)
    return InvestigationDetailOutputSerializer(selectors.investigation_detail(investigation)).data


class InvestigationListCreateApi(ServiceApiView):
    @extend_schema(responses={200: InvestigationOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        rows = selectors.investigations_for_user(actor=actor_of(request))
        return Response(InvestigationOutputSerializer(rows, many=True).data)

    @extend_schema(
        request=InvestigationCreateInputSerializer,
        responses={201: InvestigationDetailOutputSerializer, **_ERRORS},
        parameters=[location_header()],
    )
    def post(self, request: Request) -> Response:
        body = InvestigationCreateInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        investigation = services.investigation_create(actor=actor_of(request), **body.validated_data)
        detail = _detail(investigation.pk, actor=actor_of(request))
        return created(detail, url_name="investigation", investigation_id=investigation.pk)


class InvestigationApi(ServiceApiView):
    @extend_schema(responses={200: InvestigationDetailOutputSerializer, **_ERRORS})
    def get(self, request: Request, investigation_id: int) -> Response:
        return Response(_detail(investigation_id, actor=actor_of(request)))


class InvestigationMembersApi(ServiceApiView):
    @extend_schema(
        request=InvestigationMembersInputSerializer,
        responses={200: InvestigationOutputSerializer, 403: ErrorOutputSerializer, **_ERRORS},
        description="The owner (its creator) or staff add members; a member gets 403 `owner_only`. "
        "People already in stay as they are; unknown ids are a 400 naming them, with nobody added.",
    )
    def post(self, request: Request, investigation_id: int) -> Response:
        # Who may add is checked before the body, so a stranger learns nothing from a 400.
        investigation_for(investigation_id, actor=actor_of(request), need=InvestigationRight.OWN)
        body = InvestigationMembersInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        investigation = services.members_add(
            investigation_id=investigation_id,
            actor=actor_of(request),
            user_ids=body.validated_data["user_ids"],
        )
        return Response(InvestigationOutputSerializer(investigation).data)


class InvestigationMentionsApi(ServiceApiView):
    @extend_schema(request=InvestigationMentionInputSerializer, responses={201: ChatMessageOutputSerializer, **_ERRORS})
    def post(self, request: Request, investigation_id: int) -> Response:
        # Who may mention is checked before the body, so a stranger learns nothing from a 400.
        investigation_for(investigation_id, actor=actor_of(request))
        body = InvestigationMentionInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        message = services.mention_create(
            investigation_id=investigation_id, actor=actor_of(request), **body.validated_data
        )
        return Response(ChatMessageOutputSerializer(message).data, status=201)


class InvestigationStatusApi(ServiceApiView):
    @extend_schema(
        request=InvestigationStatusInputSerializer, responses={200: InvestigationOutputSerializer, **_ERRORS}
    )
    def post(self, request: Request, investigation_id: int) -> Response:
        investigation_for(investigation_id, actor=actor_of(request))
        body = InvestigationStatusInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        investigation = services.status_change(
            investigation_id=investigation_id, actor=actor_of(request), status=body.validated_data["status"]
        )
        return Response(InvestigationOutputSerializer(investigation).data)
