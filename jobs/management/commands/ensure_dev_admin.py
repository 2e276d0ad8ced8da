"""The development admin that `make run` prints: a superuser in the operators group, with
a password and an API token kept in a file under .data/ so that every run shows the same
ones (the database keeps only the password's and the token's hashes)."""

import json
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import transaction
from django.db.models import Field

from jobs.api.auth import hash_token, issue_token
from jobs.management.commands._database import DatabaseCommand
from jobs.models import ApiToken
from jobs.roles import Role, assign_role


def read_credentials(path: Path) -> dict[str, str]:
    try:
        stored = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {key: value for key, value in stored.items() if isinstance(value, str)}


def checked_username(username: str) -> str:
    """A name the user model's field takes (as `createsuperuser` would check it)."""
    user_model = get_user_model()
    field = user_model._meta.get_field(user_model.USERNAME_FIELD)
    if not isinstance(field, Field):  # a relation: nothing a name could be checked against
        return username
    try:
        field.clean(username, None)
    except ValidationError as error:
        raise CommandError(f"--username {username!r}: {' '.join(error.messages)}") from None
    return username


def checked_credentials_path(path: Path) -> Path:
    """`path`, in a directory that exists (`make run` makes its data directory first): a
    mistyped path does not quietly become new directories holding a password."""
    if path.is_dir():
        raise CommandError(f"--credentials-file {path} is a directory: name a file in it.")
    if not path.parent.is_dir():
        raise CommandError(
            f"--credentials-file {path}: the directory {path.parent} does not exist."
        )
    return path


def write_credentials(path: Path, credentials: dict[str, str]) -> None:
    partial = path.with_suffix(".tmp")
    # Created owner-only from the start: the file holds a password and a token in clear.
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(credentials, handle, indent=2)
    partial.replace(path)


class Command(DatabaseCommand):
    help = (
        "Create or update the development admin (superuser, operator) and print its "
        "password and an API token. Refuses when DEBUG is off, unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--credentials-file",
            type=Path,
            default=settings.BASE_DIR / ".data" / "dev-admin.json",
            help="where the password and token are kept between runs, in a directory that "
            "exists (default .data/; make run gives the one in its data directory)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--force", action="store_true", help="run even when DEBUG is off")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG and not options["force"]:
            raise CommandError(
                "DEBUG is off: a development admin with a password on disk does not belong "
                "in production. Use `createsuperuser` and `create_api_token`, or --force."
            )
        username = checked_username(options["username"])
        path = checked_credentials_path(options["credentials_file"].resolve())
        stored = read_credentials(path)
        if stored.get("username") != username:
            stored = {}
        password = stored.get("password") or secrets.token_urlsafe(12)
        with transaction.atomic():
            user, _ = get_user_model().objects.get_or_create(
                username=username, defaults={"email": f"{username}@localhost"}
            )
            user.is_active = user.is_staff = user.is_superuser = True
            if not user.check_password(password):
                user.set_password(password)
            user.save()
            assign_role(user, Role.OPERATOR)
            token = stored.get("token", "")
            if not ApiToken.objects.filter(user=user, key_hash=hash_token(token)).exists():
                token = issue_token(user)
        credentials = {
            "username": username,
            "password": password,
            "token": token,
            "credentials_file": str(path),
        }
        write_credentials(path, credentials)
        if options["json"]:
            self.stdout.write(json.dumps(credentials))
            return
        self.stdout.write(f"Development admin: {username} / {password}")
        self.stdout.write(f"API token:         {token}")
        self.stdout.write(f"(kept in {path})")
