"""`manage.py check --deploy` under README's production settings: no warning at all.

Run as a process, since these settings are read once, at start-up."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# README, "Production settings" (behind a TLS-terminating proxy).
PRODUCTION = {
    "DEBUG": "false",
    "ALLOWED_HOSTS": "jobs.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://jobs.example.com",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_PROXY_SSL_HEADER_NAME": "X-Forwarded-Proto",
    "TRUSTED_PROXIES": "1",
}


def check_deploy(**environment: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SECRET_KEY": secrets.token_urlsafe(50), **environment}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_is_clean_under_the_documented_production_settings() -> None:
    checked = check_deploy(**PRODUCTION)
    assert checked.returncode == 0, checked.stderr
    assert "System check identified no issues" in checked.stdout


@pytest.mark.parametrize(
    ("left_out", "warning"),
    [
        ("SECURE_HSTS_SECONDS", "security.W004"),
        ("SECURE_SSL_REDIRECT", "security.W008"),
        ("SESSION_COOKIE_SECURE", "security.W012"),
        ("CSRF_COOKIE_SECURE", "security.W016"),
    ],
)
def test_each_https_setting_is_needed(left_out: str, warning: str) -> None:
    checked = check_deploy(**{k: v for k, v in PRODUCTION.items() if k != left_out})
    assert checked.returncode != 0
    assert warning in checked.stderr


def test_the_readme_documents_these_settings() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Production settings") :]
    for name, value in PRODUCTION.items():
        assert f"{name}={value}" in section, name
