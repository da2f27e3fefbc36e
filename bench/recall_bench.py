"""`evertalk bench recall` at N = 2,000 messages and 40 facts against the fakes: the time and
the model calls to build the tree and to ask the questions (evertalk's turns, then the
baseline's calls).

`python -m bench.recall_bench [MESSAGES] [FACTS]`. The compactor fake keeps every codename's
sentence in its lines and the reader fake answers from what its request holds (see
tests/recall/recall_fakes.py), both at once, so that the figure is the harness and the service:
importing, the compactor's scheduling, the turns' settle waits and tool loops.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "recall"))

from recall_fakes import script

from evertalk.recall.command import generated_case
from evertalk.recall.generator import generate
from evertalk.recall.report import Report
from evertalk.recall.runner import Options, new_report
from evertalk.recall.runner import run as run_bench
from fakes import AnthropicFake, serve

KEY = "sk-ant-recall-bench-0000000000"


@dataclass(frozen=True)
class Result:
    messages: int
    facts: int
    build_s: float
    ask_s: float
    baseline_s: float
    report: Report

    def lines(self) -> list[str]:
        r = self.report
        right, asked = r.evertalk.recall()
        return [
            f"recall bench: {self.messages:,} messages, {self.facts} facts (fakes): import and "
            f"build {self.build_s:.1f} s, {r.building.calls:,} calls; asking "
            f"{self.ask_s:.1f} s, {r.asking.calls:,} calls ({(self.ask_s / max(asked, 1)):.2f} s "
            f"a question, {r.evertalk.zooms() or 0:.1f} zooms); baseline {self.baseline_s:.1f} s, "
            f"{r.baseline_spend.calls:,} calls; recall {right}/{asked}"
        ]


def run(messages: int = 2_000, facts: int = 40) -> Result:
    chat = generate(messages, facts, seed=1)
    names = [q.topic for q in chat.questions]
    folder = Path(tempfile.mkdtemp(prefix="evertalk-recall-bench-"))
    marks: dict[str, float] = {}

    def say(line: str) -> None:
        for phase in ("importing", "question 1/", "the baseline"):
            if phase in line:
                marks.setdefault(phase, time.perf_counter())

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ANTHROPIC_")}
    try:
        fake = AnthropicFake(script(names, chat.size), ping=False)
        with serve(fake.app) as url:
            user = folder / "user"
            user.mkdir()
            (user / "config.toml").write_text(
                f'provider = "anthropic"\nmodel = "claude-sonnet-5-5"\napi_key = "{KEY}"\n'
                f'base_url = "{url}"\n[memory]\nmodel = "claude-haiku-5-5"\n'
            )
            (user / "config.toml").chmod(0o600)
            options = Options(user_home=user, scratch_root=folder)
            report = new_report(options, chat.seed, None, facts)
            run_bench([generated_case(chat)], options, report, say)
            ended = time.perf_counter()
    finally:
        os.environ.update(saved)
        shutil.rmtree(folder, ignore_errors=True)
    began, asking, baseline = marks["importing"], marks["question 1/"], marks["the baseline"]
    return Result(messages, facts, asking - began, baseline - asking, ended - baseline, report)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000
    facts = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    result = run(count, facts)
    for line in result.lines():
        print(line)
    print("\n".join(result.report.table()))
