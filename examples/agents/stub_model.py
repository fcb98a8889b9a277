#!/usr/bin/env python3
"""A stand-in for an OpenAI-compatible model service on loopback, for the review-team demo.

`POST .../chat/completions` answers one chat completion whose content is a `Decision`
(`{"verdict": "merge"}`). Each request's path and `Authorization` header are appended to
the log file, so the demo can show that the provider key arrived here, and only here.

Usage: stub_model.py PORT LOGFILE
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT = int(sys.argv[1])
LOG = sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        with open(LOG, "a", encoding="utf-8") as log:
            seen = {"path": self.path, "authorization": self.headers.get("authorization")}
            log.write(json.dumps(seen) + "\n")
        if not self.path.endswith("/chat/completions"):
            self.send_response(404)
            self.end_headers()
            return
        content = json.dumps({"verdict": "merge"})
        body = json.dumps({
            "id": "chatcmpl-demo", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


HTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
