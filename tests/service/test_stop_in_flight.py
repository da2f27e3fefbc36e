"""`evertalk service stop` while a summary is in flight: it says what it waits for, and the
service is gone within a few seconds (the call cancelled and counted in its log), not after the
model's slowest answer."""

from __future__ import annotations

from pathlib import Path

from agent.test_turn_support import is_compaction
from evertalk.client.connection import connect
from evertalk.protocol import replies, requests
from evertalk.protocol.paths import log_path
from fakes import AnthropicFake, Script, serve, slow, summarizer
from home_config import write_config
from polling import wait_until
from served_home import run

HELD = 120.0  # how long the model takes for a summary: twice what the stop is given


def test_a_stop_cancels_a_slow_summary_and_says_so(tmp_path: Path) -> None:
    fake = AnthropicFake(Script().route(is_compaction, slow(HELD, summarizer(120))))
    home = tmp_path / "home"
    with serve(fake.app) as url:
        write_config(home, base_url=url, settle=0)
        with connect(home, "capture", start=True) as conn:
            text = "a message long enough that its line needs the model " * 20
            message = requests.OutsideMessage(kind="user", text=text, key="k0")
            conn.request(requests.Append(messages=[message]), replies.Appended)
        wait_until(lambda: len(fake.records) > 0, "the summary's call", 30)
        stopped = run(home, "service", "stop", timeout=HELD / 2)  # a stop that awaited it fails
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith("evertalk service (pid ")
    assert stopped.stderr == (
        "evertalk: service: stopping once the 1 summary in flight land (at most 3 s, then they"
        " are cancelled)\n"
    )
    assert len(fake.records) == 1 and not fake.records[0].finished  # cancelled, not awaited
    assert "cancelled 1 summary calls in flight" in log_path(home).read_text()  # counted
