"""URLs of the quotas: my-resources (page and JSON) and the staff override endpoints."""

urlpatterns: list = []
