"""A writer process for the crash test: appends keyed messages and builds nodes until killed.

It prints `ack K` only after the append of message K has returned, so every acknowledged
message must survive a kill -9 at any point.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from evertalk.chat import Chat


def main() -> None:
    chat_dir, first = Path(sys.argv[1]), int(sys.argv[2])
    # "long": some messages need two or three pages (SPEC §1.6), each written in one append
    sizes = [5, 300, 2000, 45_000, 70_000] if sys.argv[3:] == ["long"] else [5, 40, 300, 700, 2000]
    rng = random.Random(first)
    chat = Chat.open(chat_dir)
    print("open", flush=True)
    k = first
    while True:
        size = rng.choice(sizes)
        chat.append("user", f"message {k} size {size} " + "x" * size, key=f"k{k}")
        print(f"ack {k}", flush=True)
        for node in chat.core.ready()[:2]:
            chat.build(node, f"line for {node} " + "s" * rng.randrange(50, 400))
        k += 1


if __name__ == "__main__":
    main()
