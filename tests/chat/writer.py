"""A writer process for the crash test: appends keyed messages and builds nodes until killed.

It prints `ack K` only after the append of message K has returned, so every acknowledged
message must survive a kill -9 at any point. In mode `views` the chat runs with small budgets (so
that its views merge often) and each ack carries the live views, as view.json would hold them.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory import Budget
from evertalk.store.views import encode_views

SMALL = Budget(ceiling=3_000, floor=1_500, cceiling=1_200, cfloor=600)


def main() -> None:
    chat_dir, first = Path(sys.argv[1]), int(sys.argv[2])
    # "long": some messages need two or three pages (SPEC §1.6), each written in one append
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    sizes = [5, 300, 2000, 45_000, 70_000] if mode == "long" else [5, 40, 300, 700, 2000]
    rng = random.Random(first)
    chat = Chat.open(chat_dir, budget=SMALL if mode == "views" else None)
    print("open", flush=True)
    k = first
    while True:
        size = rng.choice(sizes)
        chat.append("user", f"message {k} size {size} " + "x" * size, key=f"k{k}")
        views = " " + encode_views(chat.core.saved()).decode().strip() if mode == "views" else ""
        print(f"ack {k}{views}", flush=True)
        for node in chat.core.ready()[:2]:
            chat.build(node, f"line for {node} " + "s" * rng.randrange(50, 400))
        k += 1


if __name__ == "__main__":
    main()
