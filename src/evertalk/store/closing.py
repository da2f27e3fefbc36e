"""`Closing`: a thing with `close` that is its own context manager (`with X(...) as x:`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Closing(ABC):
    """Closed as the `with` block ends, whether or not it raised."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what it holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
