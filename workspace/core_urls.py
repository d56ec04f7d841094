"""URLs of the workspace core: apps, items, files, exec, sandboxes."""

urlpatterns: list = []
