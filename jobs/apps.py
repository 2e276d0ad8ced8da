from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import audit, events, stats, tasks_backend, webhooks  # noqa: F401 (audit: its signals)
        from .notifier import notifier
        from .registry import registry

        # Every installed app's handlers.py registers its job types (the worker's built-in
        # ones included): creating a job validates its payload against them.
        autodiscover_modules("handlers")
        # Importing a stored job's task declared on an alias of another backend registers
        # nothing: the worker would leave its jobs waiting.
        registry.add_loader(tasks_backend.load_task)
        # After each committed transition, in this order: live updates first, then the
        # counters, then webhook deliveries (which are jobs, and so transitions themselves),
        # then Django's task_finished for the tasks it finished (sent on a thread of their own).
        notifier.subscribe(events.publish_batch)
        notifier.subscribe(stats.count_batch)
        notifier.subscribe(webhooks.dispatch_batch)
        notifier.subscribe(tasks_backend.finished_batch)
