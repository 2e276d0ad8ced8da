"""`python manage.py create_api_token <username> [--role viewer|operator]`."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from jobs.api.auth import issue_token
from jobs.roles import Role, assign_role


class Command(BaseCommand):
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
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            if created or role is not None:
                assign_role(user, Role(role or Role.VIEWER))
            token = issue_token(user)
        verb = "Created" if created else "Found"
        role_note = f" with role {role}" if role else ""
        self.stderr.write(f"{verb} user {username}{role_note}. Token (shown once):")
        self.stdout.write(token)
