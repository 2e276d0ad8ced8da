"""daphne as an installed app, for its `runserver`, without loading its server everywhere.

daphne's own AppConfig (`daphne.apps`) imports `daphne.server`, and with it Twisted, so that
Twisted's asyncio reactor is installed before anything else imports a reactor: 0.17 s of
CPU in every process that loads the apps (each `runworker`, each `manage.py` command), a
fifth of its start. Nothing in the project imports a reactor, and daphne's `runserver`
imports its server when it runs, so this config only names the app: Django finds that
`runserver` in daphne's package, ahead of staticfiles' by the order of INSTALLED_APPS.
"""

from django.apps import AppConfig


class DaphneConfig(AppConfig):
    name = "daphne"
    verbose_name = "Daphne"
