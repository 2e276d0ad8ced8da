"""Two roles for the API and the console: viewers read, operators also act.

A role is membership of a Django group, so the admin can change it; staff and superusers
are operators.
"""

from enum import StrEnum

from django.contrib.auth.models import AnonymousUser, Group, User


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"


OPERATORS_GROUP = "operators"
VIEWERS_GROUP = "viewers"


def is_operator(user: User | AnonymousUser) -> bool:
    if not user.is_authenticated:
        return False
    if getattr(user, "is_staff", False) or getattr(user, "is_superuser", False):
        return True
    # Read along with the user by whoever loaded it (the API's token lookup), else asked now.
    known = getattr(user, "in_operators_group", None)
    if known is not None:
        return bool(known)
    return user.groups.filter(name=OPERATORS_GROUP).exists()


def assign_role(user: User, role: Role) -> None:
    operators, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    viewers, _ = Group.objects.get_or_create(name=VIEWERS_GROUP)
    groups = user.groups
    if role is Role.OPERATOR:
        groups.remove(viewers)
        groups.add(operators)
    else:
        groups.remove(operators)
        groups.add(viewers)
