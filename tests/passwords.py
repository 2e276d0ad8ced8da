"""The password hasher of the test suite."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FewRoundsPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 with few rounds: the suite makes hundreds of users, and a million
    rounds each (0.5-1 s of CPU) were a fifth of its time. The hashes keep the algorithm
    name and record their rounds, so a server process with the default hashers still
    verifies them (and upgrades them on login)."""

    iterations = 1000
