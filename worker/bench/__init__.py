"""Benchmarks behind `python manage.py benchmark`: the schedulers, and end to end."""
