#!/usr/bin/env python3
"""Capture real multipart/form-data bodies for tests/http/multipart.scm.

Writes upload.bin (1,024 deterministic bytes full of CR, LF, "--" and
near-boundary runs), starts an HTTP server on 127.0.0.1 that saves each
POST body raw, and posts to it with curl and with Python's requests:

  curl.body, curl.content-type          curl -s -F name=value -F file=@upload.bin -F empty=
  requests.body, requests.content-type  requests.post(data=..., files=...), a UTF-8 file name

Run from anywhere: python3 tests/data/multipart/capture.py
"""
import http.server
import os
import subprocess
import threading

HERE = os.path.dirname(os.path.abspath(__file__))


def upload_bytes():
    out = bytearray()
    # Runs that look like the start of a delimiter: curl's boundaries are
    # 24 dashes and 16 hex digits, requests' 32 hex digits.
    pieces = [b"\r\n", b"\n", b"\r", b"--", b"\r\n--", b"\r\n-", b"\r\r\n--",
              b"\r\n" + b"-" * 26, b"\r\n--" + b"-" * 24 + b"0123", b"--\r\n",
              b"\r\n--0", b"\x00", b"\xff"]
    state = 12345
    while len(out) < 1024:
        state = (state * 1103515245 + 12345) % (1 << 31)
        if state % 5 == 0:
            out += pieces[(state >> 8) % len(pieces)]
        else:
            out.append((state >> 16) & 0xFF)
    return bytes(out[:1024])


class Capture(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        name = self.path.strip("/")
        with open(os.path.join(HERE, name + ".body"), "wb") as f:
            f.write(body)
        with open(os.path.join(HERE, name + ".content-type"), "w") as f:
            f.write(self.headers["Content-Type"] + "\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    upload = os.path.join(HERE, "upload.bin")
    with open(upload, "wb") as f:
        f.write(upload_bytes())
    server = http.server.HTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/" % server.server_port
    subprocess.run(["curl", "-s", "-F", "name=value", "-F", "file=@" + upload,
                    "-F", "empty=", url + "curl"], check=True)
    import requests
    with open(upload, "rb") as f:
        requests.post(url + "requests",
                      data={"name": "value", "greeting": "h\u00e9llo \u2603"},
                      files={"file": ("na\u00efve \"quoted\".bin", f, "application/octet-stream")})
    server.shutdown()


if __name__ == "__main__":
    main()
