#!/usr/bin/env python3
"""A scripted stand-in of an OpenAI-compatible model playing a simulated user, for dry runs
of `wozkit simulate-users` without a model (the figures in docs/simulated-users.md).

It answers `POST /v1/chat/completions` from the prompt written by the default template
(wozkit_core::simulated_users::DEFAULT_PROMPT): on turn N it says the goal's sentence N (a WoZ
study's generated goal, one sentence per line; on a chat page the page's own words, cut into
sentences), and once every sentence is said, `Thank you, that is all. [END]`. Asked for an
arena's vote (the default vote prompt, DEFAULT_VOTE_PROMPT), it votes for the side whose
replies were longer, a tie when they were as long, and says so. Asked a question after the
conversation (the default answer prompt, DEFAULT_ANSWER_PROMPT), it gives a scale's
second-highest point when every message was answered and its lowest otherwise, a choice's first
option, a number's lowest value, and a short sentence for a text. Standard library only.

    python3 tools/stand-in-user.py 8000      # then --user goal-follower=http://127.0.0.1:8000/v1#scripted
"""

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vote(prompt: str) -> str:
    _, sides = prompt.split("The conversation with the assistant on the left:", 1)
    left, _, right = sides.partition("The conversation with the assistant on the right:")

    def chars(text: str) -> int:
        return sum(len(l) - len("assistant: ") for l in text.splitlines() if l.startswith("assistant: "))

    a, b = chars(left), chars(right)
    if a == b:
        return "tie\nThe answers were as long."
    side = "left" if a > b else "right"
    return f"{side}\nIts answers said more ({max(a, b)} characters against {min(a, b)})."


def question(prompt: str) -> str:
    conversation = prompt.split("The conversation:\n", 1)[-1].split("\n\nAs that user", 1)[0]
    said = [l for l in conversation.splitlines() if l.startswith("user: ")]
    answered = [l for l in conversation.splitlines() if l.startswith("assistant: ")]
    m = re.search(r"Answer with one number from 1 to (\d+)", prompt)
    if m:
        points = int(m.group(1))
        return str(max(1, points - 1)) if said and len(answered) >= len(said) else "1"
    m = re.search(r"options[^\n]*:\n- ([^\n]+)", prompt)
    if m:
        return m.group(1)
    m = re.search(r"number (?:from|of at least) (-?[\d.]+)", prompt)
    if m:
        return m.group(1)
    if "Answer with one" in prompt and "number" in prompt:
        return "1"
    return f"The assistant answered {len(answered)} of my {len(said)} messages."


def answer(prompt: str) -> str:
    if "The conversation with the assistant on the left:" in prompt:
        return vote(prompt)
    if "answer this question about the conversation" in prompt:
        return question(prompt)
    goal = ""
    if "goal:\n" in prompt:
        goal = prompt.split("goal:\n", 1)[1].split("\n\nSay what", 1)[0]
    turn = 1
    m = re.search(r"\(turn (\d+) ", prompt)
    if m:
        turn = int(m.group(1))
    lines = [l for l in goal.splitlines() if l.strip()]
    if len(lines) <= 1:
        lines = [s for s in re.split(r"(?<=[.!?])\s+", goal) if s.strip()]
    if turn <= len(lines):
        return "I am looking for this. " + lines[turn - 1]
    return "Thank you, that is all. [END]"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        out = json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": answer(prompt)}}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
