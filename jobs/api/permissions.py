from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from jobs.roles import is_operator


class RolePermission(BasePermission):
    """Any signed-in user may read; only operators may change anything."""

    # Every write route's refusal, not only the jobs': a viewer refused a queue's pause read
    # that operators "may create, cancel, retry and purge jobs".
    message = (
        "Your role may only read. Operators may also act on jobs, queues, limits and schedules."
    )

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in SAFE_METHODS or is_operator(request.user):
            return True
        # A method the route lacks is left to the 405 that everyone gets: refused here as a
        # matter of role, it told a viewer that an operator could `PATCH /jobs/{id}`.
        method = str(request.method).lower()
        return method not in view.http_method_names or not hasattr(view, method)
