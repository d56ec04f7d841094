"""Quota endpoints: my-resources and closing from it, staff overrides (the pages are in `pages.py`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from collab.actor import actor_of
from collab.api import ServiceApiView
from collab.errors import NotFound
from collab.identity import unknown_user_ids
from collab.serializers import ErrorOutputSerializer
from quotas import selectors, services
from quotas.access import overrides_or_404
from quotas.serializers import (
    MyResourcesOutputSerializer,
    UserResourceDetailOutputSerializer,
    UserResourceListOutputSerializer,
    UserResourceOverrideInputSerializer,
)

_STAFF_ERRORS = {404: ErrorOutputSerializer}


class MyResourcesApi(ServiceApiView):
    @extend_schema(responses={200: MyResourcesOutputSerializer})
    def get(self, request: Request) -> Response:
        return Response(MyResourcesOutputSerializer(selectors.my_resources(actor=actor_of(request))).data)


class MyLiveSandboxApi(ServiceApiView):
    @extend_schema(responses={204: None, 404: ErrorOutputSerializer, 503: ErrorOutputSerializer})
    def delete(self, request: Request, item_id: str) -> Response:
        services.my_sandbox_close(actor=actor_of(request), item_id=item_id)
        return Response(status=204)


def _staff_only(request: Request) -> None:
    # Before the user id and the body are read, so a non-staff caller learns nothing from a 400.
    overrides_or_404(actor=actor_of(request))


def _known_user(user_id: str) -> None:
    if unknown_user_ids([user_id]):
        raise NotFound(error="unknown_user", detail=f"{user_id!r} is not in the user directory.")


class UserResourceListApi(ServiceApiView):
    @extend_schema(
        operation_id="admin_user_resources_list", responses={200: UserResourceListOutputSerializer, **_STAFF_ERRORS}
    )
    def get(self, request: Request) -> Response:
        _staff_only(request)
        return Response(UserResourceListOutputSerializer(selectors.overrides_listing()).data)


class UserResourceApi(ServiceApiView):
    @extend_schema(responses={200: UserResourceDetailOutputSerializer, **_STAFF_ERRORS})
    def get(self, request: Request, user_id: str) -> Response:
        _staff_only(request)
        _known_user(user_id)
        return Response(UserResourceDetailOutputSerializer(selectors.override_of_user(user_id=user_id)).data)

    @extend_schema(
        request=UserResourceOverrideInputSerializer,
        responses={200: UserResourceDetailOutputSerializer, 400: ErrorOutputSerializer, **_STAFF_ERRORS},
    )
    def put(self, request: Request, user_id: str) -> Response:
        _staff_only(request)
        _known_user(user_id)
        body = UserResourceOverrideInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.override_set(user_id=user_id, values=body.validated_data["values"], actor=actor_of(request))
        return Response(UserResourceDetailOutputSerializer(selectors.override_of_user(user_id=user_id)).data)

    @extend_schema(responses={204: None, **_STAFF_ERRORS})
    def delete(self, request: Request, user_id: str) -> Response:
        _staff_only(request)
        _known_user(user_id)
        services.override_delete(user_id=user_id, actor=actor_of(request))
        return Response(status=204)
