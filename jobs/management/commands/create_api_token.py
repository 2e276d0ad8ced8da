"""`python manage.py create_api_token <username> [--role viewer|operator]`."""

from typing import Any, cast

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import transaction
from django.db.models import Field

from jobs.api.auth import issue_token
from jobs.management.commands._database import DatabaseCommand
from jobs.roles import Role, assign_role


class Command(DatabaseCommand):
    help = (
        "Create a bearer token for the HTTP API and print it (it is stored hashed, so this is "
        "the only time it is shown). Creates the user when needed; a new user is a viewer "
        "unless --role says otherwise."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            choices=[role.value for role in Role],
            help="Set the user's role (new users default to viewer; existing ones keep theirs).",
        )

    def handle(self, *args: Any, username: str, role: str | None, **options: Any) -> None:
        user_model = get_user_model()
        with transaction.atomic():
            user = user_model._default_manager.filter(
                **{user_model.USERNAME_FIELD: username}
            ).first()
            created = user is None
            if user is None:
                user = user_model(**{user_model.USERNAME_FIELD: self._valid(username)})
                user.set_unusable_password()
                user.save()
            if not user.is_active:
                raise CommandError(
                    f"{username!r} is inactive, and an inactive user's tokens are refused: "
                    "activate the user first (is_active, in the admin)."
                )
            if role == Role.VIEWER and (user.is_staff or user.is_superuser):
                raise CommandError(
                    f"{username!r} is staff, and staff users are operators whatever their "
                    "group: a read-only token needs a user that is not staff."
                )
            if created or role is not None:
                assign_role(user, Role(role or Role.VIEWER))
            token = issue_token(user)
        verb = "Created" if created else "Found"
        role_note = f" with role {role}" if role else ""
        self.stderr.write(f"{verb} user {username}{role_note}. Token (shown once):")
        self.stdout.write(token)

    @staticmethod
    def _valid(username: str) -> str:
        """`username` as the user model's field cleans it, or the reason it refuses it (as
        `createsuperuser` does: the same validators, the same words)."""
        user_model = get_user_model()
        field = cast("Field[Any, Any]", user_model._meta.get_field(user_model.USERNAME_FIELD))
        try:
            cleaned: str = field.clean(username, None)
        except ValidationError as error:
            raise CommandError(f"{username!r}: {' '.join(error.messages)}") from None
        return cleaned
