from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """Installed only in the benchmark's processes (SCHEDULER_EXTRA_APPS=benchmarks), so that
    its job types are discovered the way a user's are: from this app's handlers.py."""

    name = "benchmarks"
    label = "benchmarks"
