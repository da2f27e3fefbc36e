"""`/forget A[-B] [yes] [REASON]` in the app (SPEC §12): the service plans and shows what would
change; with `yes` it forgets. The preview comes first, so the user reads what is at stake
before typing the word that does it."""

from __future__ import annotations

import re

from msgspec.structs import replace

from evertalk.client.remote import Remote, ServiceError
from evertalk.protocol.replies import ForgetPreview, Forgotten
from evertalk.protocol.requests import Forget
from evertalk.slash import FORGET, CommandError
from evertalk.terminal_text import counted


def previews(args: tuple[str, ...]) -> bool:
    """Whether `/forget` with these words shows the preview, which quotes the messages."""
    return not (len(args) > 1 and args[1].lower() == "yes")


async def forget_in_app(remote: Remote, args: tuple[str, ...]) -> list[str]:
    """The rows `/forget` shows: the preview, or what was done."""
    if not args or re.fullmatch(r"\d+(-\d+)?", args[0]) is None:
        raise CommandError(f"usage: {FORGET.usage}")
    confirmed = not previews(args)
    reason = " ".join(args[2:] if confirmed else args[1:]) or None
    frame = Forget(range=args[0], reason=reason)
    try:
        if not confirmed:
            preview = await remote.request(replace(frame, preview=True), ForgetPreview)
            lines = list(preview.lines)
            typed = " ".join(["/forget", args[0], "yes", *args[1:]])
            return [*lines, f"Type `{typed}` to forget this for good."]
        done = await remote.request(frame, Forgotten)
    except ServiceError as error:
        raise CommandError(str(error)) from None
    return [f"Forgotten: {counted(done.messages, 'message')}; {rebuilt(done.summaries)}."]


def rebuilt(summaries: int) -> str:
    """`2 summaries are built again`, `1 summary is`, `no summary is`."""
    if not summaries:
        return "no summary is built again"
    verb = "is" if summaries == 1 else "are"
    return f"{counted(summaries, 'summary', 'summaries')} {verb} built again"
