"""A loopback HTTP server laid out as MLCommons' R2 storage, for the download tests (a real server, no mocks).

  /metadata/<name>.uri   body: the dataset's base URL (http://127.0.0.1:PORT/data/<name>)
  /metadata/<name>.md5   `<md5>  ./<relative path>` lines
  /data/<name>/<path>    the files, with HTTP Range support (206 + Content-Range)
Faults per file path: "drop" (promise the whole file, send `drop_at` bytes, hang up; once), "403", "302",
"html" (an HTML page with status 200), "404" (listed but absent). Hostile answers, per file path or per
metadata name (`<name>.md5`, `<name>.uri`): "endless" (no Content-Length, bytes until the client hangs up),
"trickle" (no Content-Length, one byte every `trickle_s`), "slowheaders" (the status line, then a header
trickling a byte every `trickle_s`), "oversize" (Content-Length of a terabyte, then
endless), "redirect" (302 to `redirect_to[key]`). `base[name]` replaces the base URL a .uri names. `auth = (user,
password)` makes every GET want that HTTP basic-auth login (401 with `WWW-Authenticate: Basic` otherwise).
Every request is recorded with its headers. A client that hangs up (a full disk, a size bound, a killed download:
what these tests make it do) is counted in `hangups`, not printed as a traceback; any other error of a handler is
printed as socketserver prints it.
"""
from __future__ import annotations
import base64, hashlib, http.server, re, sys, threading, time

LINE = b"d41d8cd98f00b204e9800998ecf8427e  ./endless\n"


class _Server(http.server.ThreadingHTTPServer):
  hangups = 0

  def handle_error(self, request, client_address):
    if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
      self.hangups += 1
    else:
      super().handle_error(request, client_address)


def basic_auth(user: str, password: str) -> str:
  return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class R2Server:
  def __init__(self):
    self.datasets: dict[str, dict[str, bytes]] = {}
    self.md5_override: dict[tuple[str, str], str] = {}
    self.faults: dict[str, str] = {}
    self.drop_at: dict[str, int] = {}
    self.requests: list[tuple[str, dict]] = []
    self.redirect_to: dict[str, str] = {}
    self.base: dict[str, str] = {}
    self.auth: tuple[str, str] | None = None
    self.trickle_s = 0.2
    self.stopping = threading.Event()
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = "HTTP/1.1"

      def log_message(self, *a):
        pass

      def _send(self, status, body=b"", ctype="application/octet-stream", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
          self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

      def _hostile(self, fault) -> bool:
        if fault == "redirect":
          self._send(302, b"", "text/plain", [("Location", server.redirect_to[self._key])])
          return True
        if fault == "slowheaders":
          self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
          try:
            while not server.stopping.is_set():
              self.wfile.write(b"a"); self.wfile.flush()
              time.sleep(server.trickle_s)
          except OSError:
            pass
          self.close_connection = True
          return True
        if fault not in ("endless", "trickle", "oversize"):
          return False
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if fault == "oversize":
          self.send_header("Content-Length", str(1 << 40))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
          while not server.stopping.is_set():
            if fault == "trickle":
              self.wfile.write(LINE[:1]); self.wfile.flush()
              time.sleep(server.trickle_s)
            else:
              self.wfile.write(LINE * 4096)
        except OSError:  # the client hung up
          pass
        return True

      def do_GET(self):
        server.requests.append((self.path, dict(self.headers)))
        if server.auth is not None and self.headers.get("Authorization") != basic_auth(*server.auth):
          return self._send(401, b"login wanted", "text/plain", [("WWW-Authenticate", 'Basic realm="r2"')])
        m = re.fullmatch(r"/metadata/([^/]+)\.(uri|md5)", self.path)
        if m and m.group(1) in server.datasets:
          name = m.group(1)
          self._key = f"{name}.{m.group(2)}"
          if self._hostile(server.faults.get(self._key)):
            return
          if m.group(2) == "uri":
            return self._send(200, (server.base.get(name) or f"{server.url}/data/{name}").encode() + b"\n",
                              "text/plain")
          lines = "".join(f"{server.md5_override.get((name, p), hashlib.md5(b).hexdigest())}  ./{p}\n"
                          for p, b in server.datasets[name].items())
          return self._send(200, lines.encode(), "text/plain")
        m = re.fullmatch(r"/data/([^/]+)/(.+)", self.path)
        if not m or m.group(1) not in server.datasets:
          return self._send(404, b"not found", "text/plain")
        rel = self._key = m.group(2)
        fault = server.faults.get(rel)
        if self._hostile(fault):
          return
        if fault == "403":
          return self._send(403, b"forbidden", "text/plain")
        if fault == "302":
          return self._send(302, b"", "text/plain", [("Location", "https://mlcommons.cloudflareaccess.com/login")])
        if fault == "html":
          return self._send(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html; charset=utf-8")
        data = server.datasets[m.group(1)].get(rel)
        if data is None or fault == "404":
          return self._send(404, b"not found", "text/plain")
        start = 0
        rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if rng:
          start = int(rng.group(1))
          if start >= len(data):
            return self._send(416, b"", "text/plain", [("Content-Range", f"bytes */{len(data)}")])
        body = data[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if rng:
          self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if fault == "drop":
          del server.faults[rel]  # once
          self.wfile.write(body[: server.drop_at.get(rel, len(body) // 2)])
          self.wfile.flush()
          self.close_connection = True
          return
        self.wfile.write(body)

    self.httpd = _Server(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
    self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

  def __enter__(self):
    self.thread.start()
    return self

  def __exit__(self, *a):
    self.stopping.set()
    self.httpd.shutdown()
    self.httpd.server_close()

  def uri(self, name: str) -> str:
    return f"{self.url}/metadata/{name}.uri"

  def gets(self, rel: str) -> list[dict]:
    """Headers of every GET of a dataset file whose path ends in `rel`."""
    return [h for p, h in self.requests if p.startswith("/data/") and p.endswith("/" + rel)]
