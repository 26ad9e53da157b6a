"""JSON over HTTP for the endpoint engine: one POST with a deadline, bounded retries with backoff, rate limits.

Standard library only (``http.client``), so the engine needs no client package and runs wherever omnieval does.

* **Deadline**: ``timeout_s`` bounds a whole attempt (connect, send, wait, read), not one socket operation: the
  socket's timeout is set to what is left before every read, so a server that trickles bytes is cut off too.
* **Retries**: a transient failure (connection refused or reset, the deadline passed, HTTP 408/429/5xx, a 2xx body
  that is not JSON) is tried again, at most ``max_retries`` more times, after ``backoff_s * 2**(n-1)`` seconds
  (capped at ``max_backoff_s``, scaled by a random factor in [0.5, 1] so that parallel requests spread out). Any
  other 4xx is final at once: the request itself is wrong (too long for the context, media the model cannot take).
* **Rate limits**: a 429's ``Retry-After`` (seconds or an HTTP date; capped at ``max_backoff_s``) sets a gate
  shared by every thread of the client: no request of this client is sent before it, so a server that says "slow
  down" is not hit again by the other workers at once.

Every failure ends as ``EndpointError`` with the attempts it took; its message never holds request headers (the key
travels only there), and any echo of the key in a response body is masked.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504}) | frozenset(range(505, 600))
BODY_SNIPPET = 300


class EndpointError(Exception):
    """A request that failed for good: ``status`` (HTTP status, or None where none came back), ``attempts``."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        self.status, self.attempts = status, attempts
        super().__init__(message)


class _Transient(Exception):
    def __init__(self, message: str, status: int | None = None, wait_s: float | None = None):
        self.status, self.wait_s = status, wait_s
        super().__init__(message)


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        return min(self.max_backoff_s, self.backoff_s * 2 ** (retry - 1)) * random.uniform(0.5, 1.0)


class JsonClient:
    """POST JSON to ``base_url + path``, JSON back. Thread-safe (one connection per attempt)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, policy: RetryPolicy = RetryPolicy()):
        split = urlsplit(base_url.rstrip("/"))
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self.scheme, self.host, self.port = split.scheme, split.hostname, split.port
        self.prefix = split.path
        self.api_key = api_key or None
        self.policy = policy
        self._gate_lock = threading.Lock()
        self._gate_until = 0.0  # time.monotonic() before which no request of this client is sent

    def post(self, path: str, body: dict) -> tuple[dict, int]:
        """The JSON reply to ``body`` and the attempts it took; ``EndpointError`` when every attempt failed."""
        data = json.dumps(body).encode()
        attempt = 0
        while True:
            attempt += 1
            self._wait_for_gate()
            try:
                return self._attempt(self.prefix + path, data), attempt
            except _Transient as exc:
                if attempt > self.policy.max_retries:
                    raise EndpointError(f"{exc} (after {attempt} attempts)", status=exc.status,
                                        attempts=attempt) from None
                wait = self.policy.backoff(attempt)
                if exc.status == 429:
                    wait = min(self.policy.max_backoff_s, exc.wait_s) if exc.wait_s is not None else wait
                    self._close_gate(wait)
                time.sleep(wait)
            except EndpointError as exc:
                exc.attempts = attempt
                raise

    # -- one attempt ----------------------------------------------------------------------------------------------
    def _attempt(self, path: str, data: bytes) -> dict:
        deadline = time.monotonic() + self.policy.timeout_s
        conn_class = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = conn_class(self.host, self.port, timeout=self.policy.timeout_s)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            conn.request("POST", path, body=data, headers=headers)
            _set_timeout(conn, deadline)
            response = conn.getresponse()
            raw = _read_until(conn, response, deadline)
        except TimeoutError:
            raise _Transient(f"no reply within timeout_s={self.policy.timeout_s:g}") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Transient(f"connection failed: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        status = response.status
        text = self._mask(raw.decode("utf-8", errors="replace"))
        if status == 429:
            raise _Transient(f"HTTP 429 (rate limited): {text[:BODY_SNIPPET]}", 429,
                             _retry_after(response.getheader("Retry-After")))
        if status in TRANSIENT_STATUS:
            raise _Transient(f"HTTP {status}: {text[:BODY_SNIPPET]}", status)
        if not 200 <= status < 300:
            raise EndpointError(f"HTTP {status}: {text[:BODY_SNIPPET]}", status=status)
        try:
            reply = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Transient(f"HTTP {status} with a body that is not JSON ({exc.msg} at {exc.pos}): "
                             f"{text[:BODY_SNIPPET]!r}", status) from None
        if not isinstance(reply, dict):
            raise _Transient(f"HTTP {status} with JSON that is not an object: {text[:BODY_SNIPPET]!r}", status)
        return reply

    def _mask(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text

    # -- the rate-limit gate --------------------------------------------------------------------------------------
    def _wait_for_gate(self) -> None:
        with self._gate_lock:
            wait = self._gate_until - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _close_gate(self, seconds: float) -> None:
        with self._gate_lock:
            self._gate_until = max(self._gate_until, time.monotonic() + seconds)


def _set_timeout(conn, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _read_until(conn, response, deadline: float) -> bytes:
    chunks = []
    while True:
        _set_timeout(conn, deadline)
        chunk = response.read1(1 << 16) if hasattr(response, "read1") else response.read(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now (delta-seconds or an HTTP date), None where absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
