"""The demo's admin index (demofarm/templates/admin/index.html) leads to the farm dashboard."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_admin_index_links_to_the_dashboard():
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("root", password="x", is_staff=True))
    assert b'href="/admin/dashboard/"' in staff.get("/admin/").content
