from django.apps import AppConfig


class HandlersAppConfig(AppConfig):
    name = "tests.handlers_app"
    label = "test_handlers_app"
