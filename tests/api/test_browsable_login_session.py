"""The browsable API's "Log in" page, under the site's Content-Security-Policy."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_browsable_apis_login_page_runs_under_the_csp_and_signs_in(viewer: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/api/v1/auth/login/?next=/api/v1/jobs")
    assert page.status_code == 200
    html = page.content.decode()
    # style-src 'self' refuses style attributes as it refuses <style>: DRF's page centred
    # its box by three of them, and showed a form stretched across the window.
    assert not re.search(r"\sstyle=|<style|\son[a-z]+=", html)
    form = re.search(r'<form method="post" action="([^"]+)"[^>]*>(.*?)</form>', html, re.S)
    assert form is not None
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(2)))
    assert fields["next"] == "/api/v1/jobs"
    credentials = {"username": viewer.username, "password": "pw-" + viewer.username}
    signed_in = browser.post(form.group(1), {**fields, **credentials})
    assert (signed_in.status_code, signed_in["Location"]) == (302, "/api/v1/jobs")
    assert browser.get("/api/v1/jobs", HTTP_ACCEPT="application/json").status_code == 200
