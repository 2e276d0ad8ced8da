import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")

# daphne serves the console's CSS and JS itself (static/ and the apps' static folders,
# htmx included), so `make run` needs no web server in front and no collectstatic.
application = ASGIStaticFilesHandler(get_asgi_application())
