import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
django.setup(set_prefix=False)

import scheduler_project.daphne_limits  # noqa: E402, F401 - answers over-long request lines
from jobs.live.handler import ASGIHandler  # noqa: E402 - needs the apps set up

# Static files (the console's CSS and JS, htmx, Swagger UI) are served by WhiteNoise's
# middleware: from the finders in development, from collectstatic's output in production.
application = ASGIHandler()
