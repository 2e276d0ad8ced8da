#!/usr/bin/env python
import os
import sys
import threading


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError
    from django.db.backends.signals import connection_created

    # Only a first connection refused says where the database is not (its address, its
    # name, its server down): one lost after that, as `runworker` rides out, is a failure
    # whose traceback tells where it struck.
    connected = threading.Event()
    connection_created.connect(lambda **_kwargs: connected.set(), weak=False)
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as refused:
        # A setting that cannot work: its message names the variable. Django's traceback
        # around it began with a KeyError for the command's name (the apps could not load).
        if "--traceback" in sys.argv:
            raise
        sys.exit(f"ImproperlyConfigured: {refused}")
    except OperationalError as refused:
        # The jobs app's commands connect before they run (`DatabaseCommand`); Django's own
        # (migrate, shell, createsuperuser) end here, in the same line.
        if connected.is_set() or "--traceback" in sys.argv:
            raise
        from jobs.management.commands._database import unreachable

        sys.exit(f"CommandError: {unreachable(refused)}")


if __name__ == "__main__":
    main()
