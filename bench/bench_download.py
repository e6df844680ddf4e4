"""Throughput of the resumable HTTP download (mlperf_bert/data/http.py) on a loopback server, md5 + sha256 included.

Serves SIZE MB from memory on 127.0.0.1 (HTTP Range supported), then times: a whole download, and a download
resumed from a .part holding the first half. Loopback measures the client's own cost (network, writes, hashing),
not the internet: the real dataset's ~13 GB of text plus ~4 GB of checkpoint come at the link's speed.

    .venv/bin/python bench/bench_download.py [--mb 256]
"""
import argparse, hashlib, http.server, os, re, sys, tempfile, threading, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mlperf_bert.data.http import download_file, part_path  # noqa: E402
from machine import describe  # noqa: E402


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--mb", type=int, default=256)
  args = ap.parse_args()
  data = os.urandom(1 << 20) * args.mb
  md5 = hashlib.md5(data).hexdigest()

  class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
      pass

    def do_GET(self):
      m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
      start = int(m.group(1)) if m else 0
      self.send_response(206 if m else 200)
      self.send_header("Content-Length", str(len(data) - start))
      if m:
        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
      self.end_headers()
      view = memoryview(data)[start:]
      for i in range(0, len(view), 1 << 20):
        self.wfile.write(view[i:i + (1 << 20)])

  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  url = f"http://127.0.0.1:{srv.server_address[1]}/blob"
  quiet = dict(md5=md5, progress=False, log=lambda s: None)
  with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "blob"
    t0 = time.perf_counter()
    download_file(url, out, **quiet)
    whole = time.perf_counter() - t0
    out.unlink()
    part_path(out, md5, url).write_bytes(data[: len(data) // 2])
    t0 = time.perf_counter()
    info = download_file(url, out, **quiet)
    resumed = time.perf_counter() - t0
    assert info["resumed_from"] == len(data) // 2 and info["md5"] == md5
  srv.shutdown()
  print(f"machine: {describe()}")
  print(f"download {args.mb} MB over loopback, md5+sha256 checked: {whole:.2f} s ({args.mb / whole:.0f} MB/s)")
  print(f"resume from 50% (Range request, md5 over the whole file): {resumed:.2f} s")


if __name__ == "__main__":
  main()
