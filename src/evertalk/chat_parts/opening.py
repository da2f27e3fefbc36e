"""`ChatOpening`: a chat over an open store, its core resumed from what the disk holds, and its
closing."""

from __future__ import annotations

from typing import Self

from evertalk.chat_parts.writing import ChatWriting
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.core import SavedViews
from evertalk.memory.text import leaf_input
from evertalk.memory.tree import Built, Tree
from evertalk.store.errors import StoreError
from evertalk.store.storage import ChatStorage


class ChatOpening(ChatWriting):
    """Opening over a store, the views a reader folded, the search index, and closing."""

    @classmethod
    def over(
        cls,
        store: ChatStorage,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        search: bool = False,
    ) -> Self:
        """The chat of an open store, which it closes from then on (and at once on failure)."""
        try:
            core, built, warning, loaded = resume(store, budget)
            chat = cls(store, core, readonly)
            if warning:
                chat.warnings.append(warning)
            folded = (loaded if isinstance(loaded, SavedViews) else None) != core.saved()
            if readonly:
                # a lost free node is the owner's to write before any view may name it
                chat._folded = (loaded,) if folded and not built else None
                chat.save_folded_views()
            else:
                chat._persist(built)
                if folded:  # folded forward, or none were saved
                    chat.checkpoints.changed(1)
                    chat.save_views()
                if search:
                    chat.keep_search_index()
        except BaseException:
            store.close()
            raise
        return chat

    def save_folded_views(self) -> bool:
        """A reader that had to fold the views saves them when no process owns the chat and
        the log is still as it read it (SPEC §3.6); whether it did. Once is enough."""
        if self._folded is None or self.store.closed:
            return False
        saved = self.store.save_views_unowned(self.core.saved(), self._folded[0])
        if saved:
            self._folded = None
        return saved

    def keep_search_index(self) -> None:
        """Add each message and summary to `index/search.sqlite` as it is logged. An index that
        cannot be opened is a warning: a search opens it again, and says why it cannot."""
        from evertalk.store.search_index import SearchIndex

        self.search_enabled = True
        try:
            self.search = SearchIndex.open(self.files.path, self.warnings)
        except StoreError as error:
            self.warnings.append(str(error))

    def close(self) -> None:
        """Save the views if they changed since the last checkpoint, then close the store. A
        failed save only means a longer fold at the next open (SPEC §3.6 step 3)."""
        try:
            if not self.store.closed and not self.readonly and self.broken is None:
                self.save_views()
        except StoreError as error:
            self.warnings.append(str(error))
        finally:
            if self.search is not None:
                self.search.close()
            self.store.close()


def resume(
    store: ChatStorage, budget: Budget | None
) -> tuple[MemoryCore, list[Built], str | None, SavedViews | str | None]:
    """The core, the free nodes it had to build, a warning, and what view.json held (the views,
    None when missing, why it is unreadable). `budget` None: the one view.json records (a reader
    that knows no model keeps the views as they are)."""
    try:
        tree = _load_tree(store)
    except StoreError:
        if not store.stale:  # else it failed on what was read before the index was rebuilt
            raise
    if store.stale:  # a read found that the index did not match the log; it was rebuilt
        store.resync()
        tree = _load_tree(store)
    saved = store.load_views()
    if isinstance(saved, str):
        core, built, _ = MemoryCore.resume(tree, None, budget)
        return core, built, f"{saved}: folded the views again from message 0", saved
    if budget is None and saved is not None and saved.budget is not None:
        budget = Budget(*saved.budget)
    core, built, warning = MemoryCore.resume(tree, saved, budget)
    return core, built, warning, saved


def _load_tree(store: ChatStorage) -> Tree:
    """The tree's sizes and flags, and the texts the core needs (see Tree.wanted); cut short
    when the store's index was rebuilt meanwhile (`store.stale`), to be loaded again."""
    tree = Tree.from_arrays(store.message_count, store.node_sizes(), store.node_flags())
    nodes, leaves = tree.wanted()
    texts = {}
    for node in nodes:
        stored = store.read_node(node[0], node[1])
        if store.stale:
            return tree
        if stored is not None:
            texts[node] = stored.text
    inputs = {}
    for i in leaves:
        message = store.read_message(i)
        if store.stale:
            return tree
        inputs[i] = leaf_input(message.kind, message.text)
    tree.supply(texts, inputs)
    return tree
