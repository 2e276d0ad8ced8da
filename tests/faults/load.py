"""The API clients that keep submitting jobs while the faults happen.

Each client is a thread with its own keep-alive HTTP connection: it submits a `count_run`
job, reads it back, and pauses, recording every answer (or the lack of one) with its time.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PAUSE_SECONDS = 0.5
_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Answer:
    at: float  # time.time() when the answer came (or its absence was certain)
    method: str
    status: int  # 0: no answer (connection refused, reset or timed out)
    retry_after: bool  # a Retry-After header came with it
    job_id: str | None  # the job a 201 created


class Load:
    def __init__(self, port: int, token: str, effects: Path, *, clients: int) -> None:
        self.port = port
        self.token = token
        self.effects = effects
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(n,), name=f"client-{n}", daemon=True)
            for n in range(clients)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(_TIMEOUT_SECONDS + 5)

    def _client(self, number: int) -> None:
        rng = random.Random(number)
        connection: http.client.HTTPConnection | None = None
        while not self._stop.is_set():
            if connection is None:
                connection = http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=_TIMEOUT_SECONDS
                )
            body = {
                "type": "count_run",
                "priority": rng.choice((1, 2, 3)),
                "payload": {"path": str(self.effects), "seconds": rng.uniform(0, 0.2)},
            }
            created = self._send(connection, "POST", "/api/v1/jobs", body)
            if created.status == 0 or (
                created.job_id is not None
                and self._send(connection, "GET", f"/api/v1/jobs/{created.job_id}").status == 0
            ):
                connection.close()
                connection = None
            self._stop.wait(_PAUSE_SECONDS)
        if connection is not None:
            connection.close()

    def _send(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
    ) -> Answer:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException):
            answer = Answer(time.time(), method, 0, False, None)
        else:
            job_id = None
            if method == "POST" and response.status == 201:
                job_id = json.loads(content)["id"]
            retry_after = response.getheader("Retry-After") is not None
            answer = Answer(time.time(), method, response.status, retry_after, job_id)
        with self._lock:
            self.answers.append(answer)
        return answer
