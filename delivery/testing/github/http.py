"""The fake GitHub's HTTP side (`delivery.testing.github.server` starts it): each request
recorded, refused (token, permissions, secondary and primary limits) or faulted as the fake
says, then answered by its REST or GraphQL handlers or by `git http-backend` as a CGI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from delivery.testing.github import apps, limits
from delivery.testing.github.faults import Fault

if TYPE_CHECKING:
    from delivery.testing.github.server import FakeGitHub


@dataclass
class RecordedRequest:
    """One request as received; `status` is filled in when it is answered (0: dropped or
    not answered yet)."""

    method: str
    path: str
    query: str
    status: int
    authorized: bool
    body: bytes
    at: float = 0.0  # the fake's clock when it arrived (pacing is asserted on it)
    # an App's installation token: when it expires, and whether it had when it was sent
    token_expires_at: float | None = None
    expired: bool = False


class FakeServer(ThreadingHTTPServer):
    """The HTTP server of one fake, which its handlers answer for."""

    daemon_threads = True

    def __init__(self, fake: FakeGitHub) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.fake = fake


class Handler(BaseHTTPRequestHandler):
    """One request to the fake: recorded, refused or faulted as the fake says, then answered
    by its REST, GraphQL or git side."""

    protocol_version = "HTTP/1.1"
    server_version = "FakeGitHub/1.0"
    # headers and body go out in two writes: with Nagle's algorithm the body waited for
    # the client's delayed ACK, 40 ms a request on a kept-alive connection
    disable_nagle_algorithm = True
    _pending: RecordedRequest | None = None
    _races_after: list[Fault] = []  # noqa: RUF012 (replaced per request, never mutated)
    # the primary limit's `x-ratelimit-*` for this request's answer (when switched on)
    _rate_headers: dict[str, str] = {}  # noqa: RUF012 (replaced per request, never mutated)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read `FakeGitHub.requests` instead

    server: FakeServer

    @property
    def fake(self) -> FakeGitHub:
        return self.server.fake

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        fake = self.fake
        split = urlsplit(self.path)
        path, query = split.path, split.query
        body = self._read_body()
        is_git = not path.startswith("/api/")
        header = self.headers.get("Authorization")
        credential = fake.apps.credential(header, path, git=is_git)
        authorized = (fake._authorized(header, is_git) if credential is None
                      else credential.authorized)
        token = None if credential is None else credential.token
        self._pending = RecordedRequest(
            method, path, query, 0, authorized, body, fake.clock(),
            token_expires_at=None if token is None else token.expires_at,
            expired=credential is not None and credential.expired)
        fake.requests.append(self._pending)
        self._races_after = []
        self._rate_headers = {}
        self._answer(fake, method, path, query, body, authorized, credential, is_git)

    def _record(self, status: int) -> None:
        """The status, noted before the answer is written."""
        if self._pending is not None:
            self._pending.status = status
            self._pending = None
        # The answer is computed; the world changes before the client can ask again.
        for race in self._races_after:
            race.times -= 1
            if race.times == 0:
                self.fake._apply_race(race)
        self._races_after = []

    def _answer(self, fake: FakeGitHub, method: str, path: str, query: str, body: bytes,
                authorized: bool, credential: apps.Credential | None, is_git: bool) -> int:
        if fake.latency:
            time.sleep(fake.latency)
        if not authorized:
            if is_git:
                return self._send(401, {"WWW-Authenticate": 'Basic realm="GitHub"'},
                                  b"Authentication required\n", "text/plain")
            message = "Bad credentials" if credential is None else credential.message
            return self._json(401, {}, {"message": message,
                                        "documentation_url": "https://docs.github.com/rest"})
        if apps.out_of_scope(credential, path):
            if is_git:
                return self._send(403, {}, b"Repository not accessible by integration\n",
                                  "text/plain")
            return self._json(403, {}, {"message": "Resource not accessible by integration"})
        token_text = limits.token_of(self.headers.get("Authorization"))
        may_write = None if credential is None or credential.token is None \
            else credential.token.may_write
        refusal = (limits.permission_refusal(fake.state, fake.login, method, path, query,
                                             body, may_write)
                   or limits.secondary_refusal(fake.secondary_limits, method, path, body,
                                               token_text))
        if refusal is None and (credential is None or credential.app is None):
            # an App's own JWT requests are not a token's: no primary limit of its own
            self._rate_headers, refusal = limits.primary_refusal(fake.primary_limits, path,
                                                                 token_text)
        if refusal is not None:
            if refusal.payload is None:
                return self._send(refusal.status, refusal.headers, refusal.text.encode(),
                                  "text/plain")
            return self._json(refusal.status, refusal.headers, refusal.payload)
        fault = fake._take_fault(method, path)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.seconds)
            fault = None
        if fault is not None and fault.kind != "drop_after_apply":
            return self._fault(fake, fault)
        races = fake._races(method, path)
        self._races_after = [race for race in races if not race.during]
        if is_git:
            status = self._git(fake, method, path, query, body)
        elif credential is not None and credential.app is not None:
            status = self._json(*fake.apps.answer(credential.app, method, path,
                                                 _loads(body)),
                                dropped=fault is not None)
        elif path == "/api/graphql" and method == "POST":
            token = None if credential is None else credential.token
            status = self._json(200, {}, fake._handle_graphql(
                _loads(body), races, None if token is None else token.covers),
                dropped=fault is not None)
        elif path.startswith("/api/v3/"):
            answer = fake._handle_rest(method, path.removeprefix("/api/v3"), query,
                                       _loads(body))
            status = self._json(*answer, dropped=fault is not None)
        else:
            status = self._json(404, {}, {"message": "Not Found"})
        return status

    def _fault(self, fake: FakeGitHub, fault: Fault) -> int:
        if fault.kind == "status":
            return self._json(fault.status, {}, {"message": "Server Error"})
        if fault.kind == "secondary_rate_limit":
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            return self._json(403, headers, {
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes"
                           " before you try again.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits"})
        if fault.kind == "primary_rate_limit":
            reset = int(fake.clock()) + fault.reset_in
            return self._json(403, {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0",
                                    "x-ratelimit-used": "5000", "x-ratelimit-reset": str(reset)},
                              {"message": "API rate limit exceeded for user ID 1."})
        body: dict[str, Any] = {"errors": fault.errors}
        if fault.data is not None:
            body["data"] = fault.data
        return self._json(200, {}, body)

    def _json(self, status: int, headers: dict[str, str], payload: Any, *,
              dropped: bool = False) -> int:
        if dropped:  # the request was applied; the client never hears about it
            self._record(0)
            self.close_connection = True
            with suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return 0
        data = b"" if payload is None else json.dumps(payload).encode()
        return self._send(status, headers, data, "application/json; charset=utf-8")

    def _send(self, status: int, headers: dict[str, str], data: bytes,
              content_type: str) -> int:
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        defaults = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999"}
        for key, value in (defaults | self._rate_headers | headers).items():
            self.send_header(key, value)
        self.end_headers()
        if data:
            self.wfile.write(data)
        return status

    def _git(self, fake: FakeGitHub, method: str, path: str, query: str, body: bytes) -> int:
        """Run `git http-backend` as a CGI for the smart HTTP protocol."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(fake.state.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(fake.root),
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": fake.login,
            "REMOTE_ADDR": "127.0.0.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        for header in ("Content-Encoding", "Git-Protocol"):
            if self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
        with fake.state.lock:  # refs read by other requests stay consistent
            done = subprocess.run(["git", "http-backend"], input=body, env=env,
                                  capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _ and b"\n\n" in done.stdout:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers, content_type = 200, {}, "application/octet-stream"
        for line in head.decode(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key.lower() == "content-type":
                content_type = value.strip()
            elif key.strip():
                headers[key.strip()] = value.strip()
        return self._send(status, headers, payload, content_type)


def _loads(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None
