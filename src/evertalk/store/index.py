"""The derived index: where each message and node is, and every node's size and flag.

It lets a chat of a million messages open without parsing its history: sizes and flags load in
one read per level, and a record is found with one read of its 16-byte location. Opening it is
`loader.py`'s job; this is the index at run time.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evertalk.store.index_files import SIZE_CODE, IndexFiles, LevelFiles, StaleIndex
from evertalk.store.keys import KeyStore
from evertalk.store.meta import Meta, new_build, seal, write_meta
from evertalk.store.tables import ABSENT, LOC_WIDTH, Loc, MemTable, Table, pack_loc

if TYPE_CHECKING:
    from evertalk.store.rewrite import Rewrite

CHECKPOINT_EVERY = 1000
CLOSE_CHECKPOINT_AFTER = 64
"""Records indexed since the last checkpoint that make a close save one. Fewer are left for the
next open to scan from the log's tail: a checkpoint costs an fsync per index file, more than a
short `-p` run's own records."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record's line is in the log, its file named."""

    file: str
    """The log file, relative to the chat folder: `main/2026-11-30.jsonl`."""
    offset: int
    length: int
    """Bytes of the line, its newline included."""


class Level:
    """One level of the tree: locations in a table, sizes and flags in memory (and in files)."""

    def __init__(
        self, loc: Table, sizes: array[int], flags: bytearray, files: LevelFiles | None = None
    ) -> None:
        self.loc = loc
        self.sizes = sizes
        self.flags = flags
        self.files = files

    def location(self, i: int) -> Loc | None:
        return Loc.unpack(self.loc.get(i))

    def set(self, i: int, loc: bytes, size: int, flag: int) -> None:
        """Node i is built: `loc` is its packed location."""
        missing = i + 1 - len(self.flags)
        if missing > 0:
            self.flags.extend(bytes(missing))
            self.sizes.frombytes(bytes(missing * self.sizes.itemsize))
        self.sizes[i] = size
        self.flags[i] = flag
        if self.files is not None:
            self.files.write(i, loc, size, flag)
        else:
            self.loc.put(i, loc)


def _at(raw: bytes, file_no: int, offset: int) -> bool:
    """Whether a packed location is the line at `offset` of file `file_no`."""
    loc = Loc.unpack(raw)
    return loc is not None and (loc.file_no, loc.offset) == (file_no, offset)


def _fit(data: array[int] | bytearray, length: int) -> None:
    """Cut or zero-pad `data` to `length` items, in place."""
    if len(data) > length:
        del data[length:]
    elif isinstance(data, bytearray):
        data.extend(bytes(length - len(data)))
    else:
        data.frombytes(bytes((length - len(data)) * data.itemsize))


class Index:
    def __init__(
        self,
        chat_dir: Path,
        meta: Meta,
        msg: Table,
        levels: list[Level],
        keys: KeyStore,
        files: IndexFiles | None,
    ) -> None:
        self.chat_dir = chat_dir
        self.meta = meta
        self.msg = msg
        self.levels = levels
        self.keys = keys
        self.files = files
        self.writable = files is not None and files.writable
        # By number, each log file's name and state: where its indexed part ends
        self._files = {state.no: (name, state) for name, state in meta.files.items()}
        self._since_checkpoint = 0
        self._new_file = False
        self._must_checkpoint = False

    @property
    def message_count(self) -> int:
        return self.meta.messages

    # Files

    def file_no(self, name: str) -> int:
        if name not in self.meta.files:
            # A checkpoint right after: files new since the last one get their numbers again
            # in name order when a crash makes the next open scan them, and two of them begun
            # in another order (a clock that stepped back) would swap numbers under locations
            # already written to the index files.
            self._new_file = True
        state = self.meta.entry(name)
        self._files.setdefault(state.no, (name, state))
        return state.no

    def _advance(self, name: str, end: int, lines: int, records: int = 1) -> None:
        state = self.meta.files[name]
        state.scanned = end
        state.lines += lines
        if lines > records:
            # a torn line's terminator: without a checkpoint the next open would warn again
            self._must_checkpoint = True

    # Updates at run time, after the log's append returned

    def add_message(self, name: str, offset: int, length: int, lines: int, key: str | None) -> int:
        i = self.meta.messages
        self.msg.put(i, pack_loc(self.file_no(name), offset, length))
        if key is not None:
            self.keys.add(key, i)
        self.meta.messages = i + 1
        self._advance(name, offset + length, lines)
        self._appended()
        return i

    def add_messages(
        self, name: str, spans: list[tuple[int, int]], extra: int, keys: list[str | None]
    ) -> list[int]:
        """Record the pages of one write: (offset, length) each; `extra` lines came before them
        (a torn line's terminator)."""
        ids = []
        for number, ((offset, length), key) in enumerate(zip(spans, keys, strict=True)):
            ids.append(self.add_message(name, offset, length, 1 + extra * (number == 0), key))
        return ids

    def add_node(
        self, node: tuple[int, int], size: int, flag: int, where: tuple[str, int, int, int]
    ) -> None:
        """Record node (l, i); `where` is (file name, offset, length, lines written)."""
        level, i = node
        name, offset, length, lines = where
        while len(self.levels) <= level:
            self.levels.append(self._new_level(len(self.levels)))
        self.levels[level].set(i, pack_loc(self.file_no(name), offset, length), size, flag)
        self._advance(name, offset + length, lines)
        self._appended()

    def ended_torn_line(self, name: str, end: int) -> None:
        """A torn last line of `name` was ended on its own: one more line, no record, and a
        checkpoint due, so that no open scans it again."""
        self._advance(name, end, 1, records=0)

    def _new_level(self, level: int) -> Level:
        if self.writable:
            assert self.files is not None
            files = self.files.level(level)
            return Level(files.loc, array(SIZE_CODE), bytearray(), files)
        return Level(MemTable(LOC_WIDTH), array(SIZE_CODE), bytearray())

    def _appended(self) -> None:
        self._since_checkpoint += 1

    @property
    def checkpoint_due(self) -> bool:
        """Every CHECKPOINT_EVERY appends, at a new file, and after an append that ended a torn
        line (else every reader beside the owner would warn about that line again)."""
        return self.writable and (
            self._since_checkpoint >= CHECKPOINT_EVERY or self._new_file or self._must_checkpoint
        )

    @property
    def checkpoint_worth_closing(self) -> bool:
        """Whether a close (or an open that scanned the log's tail) should checkpoint: enough
        is new that scanning it at the next open would cost more than the checkpoint's fsyncs,
        or the next open would warn again about what was found."""
        return (
            self._since_checkpoint >= CLOSE_CHECKPOINT_AFTER
            or self._new_file
            or self._must_checkpoint
        )

    def scanned_tail(self, records: int, *, must: bool) -> None:
        """The open found `records` past the checkpoint (`must`: skipped lines, new files)."""
        self._since_checkpoint += records
        self._must_checkpoint |= must

    def rewrote(self, rewrite: Rewrite) -> None:
        """Follow a file rewritten by a forget: the locations of its records move, its dropped
        nodes become unbuilt, and its indexed end moves by what it grew. Only that file's
        records are touched, not the whole log's; a checkpoint makes it durable."""
        state = self.meta.files[rewrite.name]
        no = state.no
        for i, old, offset, length in rewrite.messages:
            loc = pack_loc(no, offset, length)
            now = self.msg.get(i) if 0 <= i < self.meta.messages else ABSENT
            if now != loc and _at(now, no, old):  # the lines before the first change stay put
                self.msg.put(i, loc)
        for level, i, old, offset, length in rewrite.nodes:
            row = self.levels[level] if self.node_flag(level, i) and old != offset else None
            if row is not None and _at(row.loc.get(i), no, old):
                row.loc.put(i, pack_loc(no, offset, length))  # its size and flag stay
        for level, i in rewrite.gone:
            if self.node_flag(level, i):
                self.levels[level].set(i, ABSENT, 0, 0)
        state.scanned += rewrite.grew
        state.lines -= len(rewrite.removed)
        state.tail, state.tail_at = "", 0
        self.meta.build = new_build()  # a reader that loaded the files before can tell
        self._must_checkpoint = True

    # Lookups

    def _location(self, loc: Loc | None) -> Location | None:
        if loc is None:
            return None
        file = self._files.get(loc.file_no)
        # Every line holds at least `{}` and its newline, within what the index has seen of its
        # file; anything else comes from damaged index files, not from the log.
        if file is None or loc.length < 3 or loc.offset + loc.length > file[1].scanned:
            raise StaleIndex("a location points outside the log")
        return Location(file[0], loc.offset, loc.length)

    def message_location(self, i: int) -> Location | None:
        if not 0 <= i < self.meta.messages:
            return None
        return self._location(Loc.unpack(self.msg.get(i)))

    def node_flag(self, level: int, i: int) -> int:
        if not 0 <= level < len(self.levels) or not 0 <= i < len(self.levels[level].flags):
            return 0
        return self.levels[level].flags[i]

    def node_location(self, level: int, i: int) -> Location | None:
        if not self.node_flag(level, i):
            return None
        return self._location(self.levels[level].location(i))

    def node(self, level: int, i: int) -> tuple[Location, int, int] | None:
        """A built node's location, flag and size; None when it is not built."""
        if not 0 <= level < len(self.levels):
            return None
        row = self.levels[level]
        flag = row.flags[i] if 0 <= i < len(row.flags) else 0
        if not flag:
            return None
        location = self._location(row.location(i))
        if location is None:
            raise StaleIndex("the index has no location for a built node")
        return location, flag, row.sizes[i]

    def key(self, key: str) -> int | None:
        return self.keys.get(key)

    def node_sizes(self) -> list[array[int]]:
        """Per level 0 … max, the sizes of the level's existing nodes (0 where unbuilt)."""
        result = []
        for level in range(self.meta.messages.bit_length()):
            sizes = self.levels[level].sizes[:] if level < len(self.levels) else array(SIZE_CODE)
            _fit(sizes, self.meta.messages >> level)
            result.append(sizes)
        return result

    def node_flags(self) -> list[bytearray]:
        """Per level 0 … max, the flags of the level's existing nodes (0 where unbuilt)."""
        result = []
        for level in range(self.meta.messages.bit_length()):
            flags = bytearray(self.levels[level].flags) if level < len(self.levels) else bytearray()
            _fit(flags, self.meta.messages >> level)
            result.append(flags)
        return result

    # Checkpoints

    def checkpoint(self) -> None:
        """Make the index files durable, then say so in meta.json (in that order)."""
        self._since_checkpoint = 0
        self._new_file = self._must_checkpoint = False
        if not self.writable:
            return
        assert self.files is not None
        self.files.sync()
        self.keys.commit()
        self.meta.levels = [len(level.flags) for level in self.levels]
        seal(self.meta, self.chat_dir)
        write_meta(self.files.dir, self.meta)

    def close(self, *, checkpoint: bool = True) -> None:
        try:
            if checkpoint:
                self.checkpoint()
        finally:
            self.keys.close()
            if self.files is not None:
                self.files.close()
