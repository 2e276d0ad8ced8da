#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as refused:
        # A setting that cannot work: its message names the variable. Django's traceback
        # around it began with a KeyError for the command's name (the apps could not load).
        if "--traceback" in sys.argv:
            raise
        sys.exit(f"ImproperlyConfigured: {refused}")


if __name__ == "__main__":
    main()
