#!/usr/bin/env python3
"""A stand-in for a CLI coding agent (`claude -p --output-format json`-like), for tests.

    fake_cli_agent.py --state DIR [--resume SESSION] [--model MODEL] [--jsonl] [resume SESSION]

Reads the prompt on stdin. DIR/script.json lists what successive invocations do, in
order: {"reply": TEXT} prints {"result": TEXT, "session_id": ..., "usage": {...}},
{"exit": N, "stderr": TEXT} fails, {"sleep": SECONDS} hangs, {"raw": TEXT} prints TEXT as
is. With --jsonl it prints Codex-like JSON lines instead (`thread.started` with the
session id, a reasoning item, the `agent_message` item, `turn.completed` with usage), and a
session may be resumed Codex's way (`resume SESSION` words). A reply may say "{env:NAME}"
to include an environment variable. Sessions are kept in
DIR/sessions/<id>.json (the prompts seen); every call is appended to DIR/calls.jsonl
(with the names of the environment variables it was given).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--resume", default="")
    parser.add_argument("--model", default="")
    parser.add_argument("--jsonl", action="store_true")
    args, words = parser.parse_known_args()
    if "resume" in words:
        args.resume = words[words.index("resume") + 1]
    state: Path = args.state
    prompt = sys.stdin.read()
    count_file = state / "count"
    count = int(count_file.read_text()) if count_file.exists() else 0
    count_file.write_text(str(count + 1))
    script = json.loads((state / "script.json").read_text())
    action = script[count] if count < len(script) else {"exit": 9, "stderr": "script ran out"}
    sessions = state / "sessions"
    sessions.mkdir(exist_ok=True)
    session_id = args.resume or f"sess-{count + 1}"
    session_file = sessions / f"{session_id}.json"
    if args.resume and not session_file.exists():
        print(f"no conversation found with session ID: {args.resume}", file=sys.stderr)
        return 1
    history = json.loads(session_file.read_text()) if session_file.exists() else []
    history.append(prompt)
    session_file.write_text(json.dumps(history))
    with (state / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps({"argv": sys.argv[1:], "stdin": prompt, "session": session_id,
                                "history": len(history), "cwd": os.getcwd(),
                                "env": sorted(os.environ)}) + "\n")
    if "sleep" in action:
        time.sleep(action["sleep"])
    if "exit" in action:
        print(action.get("stderr", ""), file=sys.stderr)
        return int(action["exit"])
    reply = action.get("raw", action.get("reply", ""))
    for name, value in os.environ.items():
        reply = reply.replace("{env:" + name + "}", value)
    if "raw" in action:
        print(reply)
        return 0
    print(f"thinking about {len(prompt)} characters", file=sys.stderr)
    if args.jsonl:
        for event in ({"type": "thread.started", "thread_id": session_id},
                      {"type": "item.completed", "item": {"type": "reasoning", "text": "hmm"}},
                      {"type": "item.completed", "item": {"type": "agent_message", "text": reply}},
                      {"type": "turn.completed",
                       "usage": {"input_tokens": len(prompt) // 4, "output_tokens": 3}}):
            print(json.dumps(event))
        return 0
    print(json.dumps({"type": "result", "result": reply, "session_id": session_id,
                      "usage": {"input_tokens": len(prompt) // 4, "output_tokens": 7}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
