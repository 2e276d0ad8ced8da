import os

import django
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
django.setup(set_prefix=False)

import scheduler_project.daphne_limits  # noqa: E402, F401 - answers over-long request lines
from jobs.live.handler import ASGIHandler  # noqa: E402 - needs the apps set up

# daphne serves the console's CSS and JS itself (static/ and the apps' static folders,
# htmx included), so `make run` needs no web server in front and no collectstatic.
application = ASGIStaticFilesHandler(ASGIHandler())
