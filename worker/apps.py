from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class WorkerConfig(AppConfig):
    name = "worker"
    verbose_name = "Worker"

    def ready(self) -> None:
        # Every installed app's handlers.py registers its job types, ours included.
        autodiscover_modules("handlers")
