#!/usr/bin/env python3
"""An example dialogue system for wozkit, in plain Python 3 (standard library only).

One process serves both protocols wozkit speaks to a system under test:

  POST /reply                 the webhook (study kind `http`)
  POST /v1/chat/completions   an OpenAI-compatible endpoint (study kind `openai`),
                              whole replies or streamed as server-sent events
  GET  /v1/models             the one model it serves (some tools ask for it)

The "model" is a tiny rule-based travel agent. It reads the whole conversation, so it
remembers a city, a month or a budget the participant gave earlier: "find me a hotel"
gets an answer about the city named three turns ago.

To plug in your own model, copy this file and replace `respond(turns)` below. Everything
else (parsing requests, streaming, errors) can stay as it is.

    python3 bot.py --port 5005                    # webhook at http://127.0.0.1:5005/reply
    python3 bot.py --port 0                       # any free port; the line printed says which
    python3 bot.py --port 5005 --delay-ms 800     # think for 0.8 s before each reply
    python3 bot.py --port 5005 --fail-every 3     # answer 500 to every 3rd request (try retries)

Once ready it prints exactly one line on standard output, `listening on http://HOST:PORT`;
each request is logged on standard error.
"""

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The model name reported by the OpenAI-compatible endpoint. Any name in a request is accepted.
MODEL_NAME = "travel-agent"


# --------------------------------------------------------------------------------------------
# The model. Replace this section with your own.
# --------------------------------------------------------------------------------------------

CITIES = [
    "Amsterdam", "Athens", "Barcelona", "Berlin", "Budapest", "Dublin", "Edinburgh",
    "Istanbul", "Kyoto", "Lisbon", "London", "Madrid", "New York", "Paris", "Prague",
    "Rome", "Seville", "Tokyo", "Vienna",
]

MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
]

HOTELS = {
    "Lisbon": "Casa do Rio in Alfama",
    "Paris": "Hôtel des Arts in Montmartre",
    "Rome": "Albergo del Sole near Campo de' Fiori",
    "Tokyo": "a small ryokan in Asakusa",
    "London": "The Bloomsbury Rooms",
}

SEASONS = {
    "Lisbon": "mild and sunny most of the year",
    "Paris": "lovely in spring, busy in summer",
    "Rome": "hot in July and August, best in spring and autumn",
    "Tokyo": "famous for cherry blossom in early April",
    "London": "changeable: pack an umbrella whatever the month",
}


def find_last(pattern_words, turns, role="user"):
    """The last of `pattern_words` mentioned in a turn by `role`, newest turn first, or None."""
    for turn in reversed(turns):
        if turn["role"] != role:
            continue
        text = turn["text"].lower()
        best = None
        best_pos = -1
        for word in pattern_words:
            for m in re.finditer(r"\b" + re.escape(word.lower()) + r"\b", text):
                if m.start() > best_pos:
                    best, best_pos = word, m.start()
        if best is not None:
            return best
    return None


def find_budget(turns):
    """The last amount of money the participant named (e.g. "800 euros", "$1200"), or None."""
    for turn in reversed(turns):
        if turn["role"] != "user":
            continue
        m = re.search(r"([$€£]\s?\d[\d,]*|\d[\d,]*\s?(?:euros?|dollars?|pounds?|eur|usd|gbp))",
                      turn["text"], re.IGNORECASE)
        if m:
            return m.group(1)
    return None


def has(text, *words):
    """Whether any of `words` appears in `text` as a whole word (case-insensitive)."""
    return any(re.search(r"\b" + re.escape(w) + r"\b", text, re.IGNORECASE) for w in words)


def respond(turns):
    """The reply to the conversation so far.

    `turns` is a list of {"role": "user" | "assistant", "text": str}, oldest first, ending
    with the participant's newest message. "assistant" turns are this system's own earlier
    replies; the system never sees any other system's replies.

    Replace this function with a call to your own model. Return the reply text.
    """
    if not turns:
        return "Hello! I'm a travel agent. Where would you like to go?"
    last = turns[-1]["text"]
    city = find_last(CITIES, turns)
    month = find_last(MONTHS, turns)
    budget = find_budget(turns)
    city_now = find_last(CITIES, turns[-1:])
    month_now = find_last(MONTHS, turns[-1:])

    if has(last, "bye", "goodbye", "thanks", "thank you"):
        if city:
            return f"You're welcome! Enjoy {city}" + (f" in {month}." if month else ".")
        return "You're welcome! Come back when you know where you'd like to go."
    if has(last, "hotel", "hotels", "stay", "accommodation", "room"):
        if not city:
            return "Happy to find you a hotel. Which city are you going to?"
        hotel = HOTELS.get(city, f"a well-reviewed small hotel in the centre of {city}")
        extra = f" It fits a budget of {budget}." if budget else " What is your budget?"
        return f"In {city} I'd suggest {hotel}.{extra}"
    if has(last, "weather", "season", "climate", "warm", "cold"):
        if not city:
            return "That depends on where you go. Which city do you have in mind?"
        season = SEASONS.get(city, "pleasant in late spring and early autumn")
        when = f" In {month} you should be fine." if month else ""
        return f"{city} is {season}.{when}"
    if has(last, "where", "which city", "remind", "summary", "summarise", "summarize"):
        if not city:
            return "You haven't picked a destination yet. Where would you like to go?"
        parts = [f"You're going to {city}"]
        if month:
            parts.append(f"in {month}")
        if budget:
            parts.append(f"with a budget of {budget}")
        return " ".join(parts) + "."
    if city_now:
        if month:
            return f"{city_now} in {month}, wonderful! Shall I look for a hotel?"
        return f"{city_now}, great choice! When are you planning to travel?"
    if month_now:
        if city:
            return f"{city} in {month_now}, noted. Shall I look for a hotel?"
        return f"{month_now} is a good time to travel. Where would you like to go?"
    if budget:
        if city:
            return f"A budget of {budget} works for {city}. Want hotel ideas?"
        return f"A budget of {budget}, noted. Which city are you thinking of?"
    if has(last, "hi", "hello", "hey"):
        return "Hello! I'm a travel agent. Where would you like to go?"
    if city:
        return f"Tell me more about your trip to {city}: dates, budget, or hotels?"
    return "Where would you like to travel? I know many cities in Europe and Japan."


# --------------------------------------------------------------------------------------------
# The protocols. Nothing below needs changing to plug in another model.
# --------------------------------------------------------------------------------------------


class Settings:
    """Command-line settings and the request counter for --fail-every."""

    delay_ms = 0
    fail_every = 0
    requests = 0
    lock = threading.Lock()

    @classmethod
    def should_fail(cls):
        """Counts a POST; true for every `fail_every`-th one."""
        with cls.lock:
            cls.requests += 1
            return cls.fail_every > 0 and cls.requests % cls.fail_every == 0


class BadRequest(Exception):
    """A request that does not follow the protocol (answered with 400)."""


def content_text(content):
    """The text of an OpenAI message `content`: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        return ""
    raise BadRequest("a message `content` must be a string or a list of parts")


def webhook_turns(body):
    """The turns of a webhook request: {"system", "dialogue_id", "turns": [{"role", "text"}]}."""
    turns = body.get("turns")
    if not isinstance(turns, list):
        raise BadRequest("the body needs `turns`, a list of {\"role\", \"text\"}")
    out = []
    for i, t in enumerate(turns):
        if not (isinstance(t, dict) and t.get("role") in ("user", "assistant")
                and isinstance(t.get("text"), str)):
            raise BadRequest(f"`turns[{i}]` must be {{\"role\": \"user\"|\"assistant\", \"text\": \"...\"}}")
        out.append({"role": t["role"], "text": t["text"]})
    return out


def openai_turns(body):
    """The turns of a chat completions request; `system` messages (the prompt) are left out."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("the body needs `messages`, a list of {\"role\", \"content\"}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(f"`messages[{i}]` is not an object")
        role = m.get("role")
        if role in ("user", "assistant"):
            out.append({"role": role, "text": content_text(m.get("content"))})
    return out


def stream_pieces(text):
    """Splits a reply into the deltas of a streamed answer: one word (with its space) each."""
    return re.findall(r"\S+\s*|\s+", text)


class Handler(BaseHTTPRequestHandler):
    """Answers the webhook and the OpenAI-compatible endpoint."""

    protocol_version = "HTTP/1.1"
    server_version = "wozkit-example-bot/1"

    def log_message(self, format, *args):  # noqa: A002 (name fixed by the base class)
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))

    def send_json(self, status, value):
        data = json.dumps(value).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status, message):
        # The OpenAI error shape; a webhook client only looks at the status.
        self.send_json(status, {"error": {"message": message, "type": "invalid_request_error"
                                          if status < 500 else "server_error"}})

    def read_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadRequest(f"the body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL_NAME, "object": "model", "owned_by": "wozkit-example"}]})
        elif self.path == "/":
            self.send_json(200, {"ok": True, "endpoints": ["/reply", "/v1/chat/completions"]})
        else:
            self.send_error_json(404, f"no such path: {self.path}")

    def do_POST(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/reply", "/v1/chat/completions"):
            # Read the body anyway so the connection stays usable.
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_error_json(404, f"no such path: {self.path}")
            return
        try:
            body = self.read_json()
            if Settings.should_fail():
                self.send_error_json(500, f"failing on purpose (--fail-every {Settings.fail_every})")
                return
            if path == "/reply":
                turns = webhook_turns(body)
            else:
                turns = openai_turns(body)
        except BadRequest as e:
            self.send_error_json(400, str(e))
            return
        if Settings.delay_ms:
            time.sleep(Settings.delay_ms / 1000)
        text = respond(turns)
        if path == "/reply":
            # Webhook reply: {"reply": "..."}.
            self.send_json(200, {"reply": text})
        elif body.get("stream") is True:
            self.stream_completion(text, body.get("model") or MODEL_NAME)
        else:
            self.send_json(200, {
                "id": f"chatcmpl-{int(time.time() * 1000)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or MODEL_NAME,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
            })

    def stream_completion(self, text, model):
        """Sends `text` as server-sent events: a role chunk, one chunk per word, a finish chunk,
        then `data: [DONE]`. The body is sent with chunked transfer encoding."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ident = f"chatcmpl-{int(time.time() * 1000)}"

        def event(delta, finish=None):
            return {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        try:
            self.send_event(event({"role": "assistant"}))
            for piece in stream_pieces(text):
                self.send_event(event({"content": piece}))
                time.sleep(0.01)  # so a viewer sees the words arrive
            self.send_event(event({}, "stop"))
            self.send_chunk(b"data: [DONE]\n\n")
            self.send_chunk(b"")  # the end of the chunked body
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing to do

    def send_event(self, value):
        self.send_chunk(b"data: " + json.dumps(value).encode("utf-8") + b"\n\n")

    def send_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def main():
    parser = argparse.ArgumentParser(description="An example dialogue system for wozkit.")
    parser.add_argument("--port", type=int, required=True, help="port to listen on; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--delay-ms", type=int, default=0, help="think time before each reply")
    parser.add_argument("--fail-every", type=int, default=0, metavar="K",
                        help="answer 500 to every K-th reply request (0: never)")
    args = parser.parse_args()
    if args.delay_ms < 0 or args.fail_every < 0:
        parser.error("--delay-ms and --fail-every must not be negative")
    Settings.delay_ms = args.delay_ms
    Settings.fail_every = args.fail_every

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
