"""Job types used only by the tests; installed with SCHEDULER_EXTRA_APPS=tests.handlers_app."""
