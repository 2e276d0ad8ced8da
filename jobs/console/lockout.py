"""The login lockout (django-axes) and what it covers: the sign-in forms of the console and
the admin, and the old password of the password change pages, which a signed-in session
could otherwise guess without limit.

`LockoutBackend` is django-axes' check, for logins that come with a request. A login
without one (a shell, Django's test client) has no client address to lock and is left to
the next backend, where django-axes would refuse it outright."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.contrib import admin
from django.contrib.auth import authenticate, forms, views
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.urls import reverse_lazy
from django.views.decorators.debug import sensitive_variables


class LockoutBackend(AxesStandaloneBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


class PasswordChangeForm(forms.PasswordChangeForm):
    """Django's, whose old password is checked as a login is (`authenticate`): a wrong one
    is a failed login of the user from the client's address, and a locked-out pair is
    refused even the right one, with the lockout page (django-axes' middleware answers for
    the request `authenticate` marked)."""

    def __init__(self, user: Any, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        self.request = request
        super().__init__(user, *args, **kwargs)

    @sensitive_variables("old_password")
    def clean_old_password(self) -> str:
        old_password: str = self.cleaned_data["old_password"]
        if authenticate(self.request, username=self.user.get_username(), password=old_password):
            return old_password
        raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")


class PasswordChangeView(views.PasswordChangeView):
    form_class = PasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}


class AdminPasswordChangeForm(PasswordChangeForm):
    required_css_class = "required"  # as the admin's own form marks its fields


class AdminPasswordChangeView(PasswordChangeView):
    """The admin's page (`AdminSite.password_change`), whose form Django does not let a
    site replace: routed ahead of the admin's own (`scheduler_project.urls`)."""

    form_class = AdminPasswordChangeForm
    success_url = reverse_lazy("admin:password_change_done")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**admin.site.each_context(self.request), **super().get_context_data(**kwargs)}
