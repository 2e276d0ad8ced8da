"""Django's PostgreSQL backend with a pool health check that costs no round trip (`base`)."""
