"""A compaction whose try meets a transient fault is sent again by the provider's retries: the
node is built, not failed, and a try that was billed (its response had begun) is in the ledger
as a failed call, once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_service import compactor_for, compactor_provider, one_message_chat, settle, until

from evertalk.ledger import Ledger, ledger_path, read_records
from evertalk.providers.retry import RetryingProvider, RetryPolicy
from fakes import AnthropicFake, summarizer
from fakes.behaviours import cut_at_start, flaky, overloaded


@pytest.mark.anyio
@pytest.mark.parametrize(("fault", "billed"), [(overloaded, 0), (cut_at_start, 1)])
async def test_a_transient_fault_is_retried_and_a_billed_try_is_in_the_ledger(
    home: Path, fault: object, billed: int
) -> None:
    fake = AnthropicFake(flaky(summarizer(100), (fault,)))  # type: ignore[arg-type]
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    provider = RetryingProvider(compactor_provider(fake), RetryPolicy(base_delay=0.001))
    compactor = compactor_for(chat, provider, ledger=ledger)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        assert (0, 0) not in compactor.failed_at and len(fake.records) == 2
        records = [r for r in read_records(ledger_path(home)).records if r.node == "0+1"]
        assert [r.failed for r in records] == [True] * billed + [False]
    finally:
        ledger.close()
        chat.close()
