"""URLs of an item's conversation."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from workspace.agent import views
from workspace.items.urls import ITEM_PATH

urlpatterns = [
    path(f"{ITEM_PATH}/messages", views.ItemMessagesApi.as_view(), name="ws-item-messages"),
]
