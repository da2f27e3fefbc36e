"""The words and templates of the generated chat: ordinary agent work, and the planted facts
with the questions that ask for them.

A question is worded apart from its fact (other verbs, other nouns), so that matching words
alone does not find the answer; both name the fact's codename, which nothing else in the chat
mentions, so that the question has one right answer.
"""

from __future__ import annotations

from typing import Final

SERVICES: Final = (
    "billing api",
    "search indexer",
    "auth gateway",
    "report builder",
    "mail relay",
    "upload worker",
    "metrics collector",
    "session store",
    "image resizer",
    "job scheduler",
    "export pipeline",
    "admin console",
    "payment webhook",
    "feature flag service",
    "cron runner",
)
FILES: Final = (
    "app/models.py",
    "app/views.py",
    "app/tasks.py",
    "lib/retry.py",
    "lib/cache.py",
    "config/settings.yaml",
    "scripts/deploy.sh",
    "tests/test_api.py",
    "tests/test_jobs.py",
    "docker-compose.yml",
    "Makefile",
    "README.md",
    "src/router.ts",
    "src/store.ts",
    "migrations/0042_add_index.sql",
    "infra/main.tf",
    "web/package.json",
    "lib/parse.py",
)
VERBS: Final = (
    "refactor",
    "speed up",
    "add tests for",
    "clean up",
    "document",
    "profile",
    "fix the flaky test in",
    "add logging to",
    "split up",
    "review",
    "type-annotate",
    "simplify",
)
ISSUES: Final = (
    "times out under load",
    "leaks file handles",
    "logs the same warning twice",
    "returns a 500 on empty input",
    "ignores the retry limit",
    "holds a lock too long",
    "double-counts retries",
    "drops the last line of the batch",
    "sorts dates as strings",
    "reads the config on every request",
    "forgets to close the cursor",
    "uses the wrong timezone",
)
TOPICS: Final = (
    "connection pooling",
    "backoff with jitter",
    "structured logging",
    "idempotent handlers",
    "database migrations",
    "feature toggles",
    "cache invalidation",
    "pagination tokens",
    "health checks",
    "graceful shutdown",
    "input validation",
    "rate limiting",
)
FILLER_TEXT: Final = (
    "the handler reads the request, checks the token, and hands the payload to the queue; "
    "a worker picks it up, writes the row, and acknowledges it once the commit is durable; "
    "errors go back to the caller with a short reason and the request id so that support can "
    "find the trace; nothing here should block the event loop for longer than a few "
    "milliseconds, and anything slower moves to the worker pool where it can be retried"
)
WORDS: Final = tuple(FILLER_TEXT.split())

USER_ASKS: Final = (
    "Can you {verb} {file}? It {issue} and I would like it gone before the release.",
    "The {service} {issue}. Have a look at {file} and tell me what you think.",
    "Quick one: what is the cleanest way to do {topic} in {file}?",
    "Please run the tests again, I changed {file} a bit.",
    "I saw the {service} {issue} again last night. Any idea why?",
    "Let's {verb} {file} next, and keep the public names as they are.",
    "Could you explain how {topic} works in the {service}? Short version is fine.",
)
EVER_REPLIES: Final = (
    "I looked at {file}: the {service} {issue} because the loop retries before it checks the "
    "limit. I moved the check up and added a test that fails on the old code.",
    "Done. {file} now handles {topic} in one place; the callers did not change.",
    "The tests pass now. The failure came from {file}, which {issue}; the fix is two lines.",
    "For {topic}, I would keep it in the {service} rather than in {file}: it already owns the "
    "state, and the other callers would not need to know.",
    "I read through {file}. Nothing alarming, but it {issue} in one branch; want me to fix it?",
)
CODE_LINES: Final = (
    "def {name}(items, limit=100):",
    "    seen = set()",
    "    for item in items:",
    "        if item.key in seen:",
    "            continue",
    "        seen.add(item.key)",
    "        yield normalize(item)",
    "    log.debug('done with %d items', len(seen))",
    "",
    "class {cls}:",
    "    def __init__(self, store, clock=time.monotonic):",
    "        self.store = store",
    "        self.clock = clock",
    "    def fetch(self, key):",
    "        started = self.clock()",
    "        value = self.store.get(key)",
    "        metrics.observe('fetch', self.clock() - started)",
    "        return value",
)
NAMES: Final = ("load_batch", "merge_rows", "flush_queue", "parse_entry", "check_limits")
CLASSES: Final = ("BatchReader", "RowMerger", "QueueFlusher", "EntryParser", "LimitChecker")
LOG_LEVELS: Final = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
LOG_EVENTS: Final = (
    "request served in {n} ms",
    "cache miss for key user:{n}",
    "worker {n} picked up a job",
    "retrying call after {n} ms",
    "connection pool at {n} of 50",
    "flushed {n} rows",
    "slow query took {n} ms",
    "health check ok after {n} ms",
    "queue depth {n}",
)
TEST_NAMES: Final = (
    "test_empty_input",
    "test_retry_limit",
    "test_batch_order",
    "test_timezone",
    "test_cursor_closed",
    "test_duplicate_rows",
    "test_token_expiry",
    "test_large_upload",
)

# --- the facts --------------------------------------------------------------------------
# Each kind: the statement (one sentence, on a line of its own, naming {c}, the codename, and
# {v}, the value), then the question, which asks for {v} in other words.

FACTS: Final[dict[str, tuple[str, str]]] = {
    "decision": (
        "After weighing the options we decided that {c} will store its pending jobs in {v}.",
        "What did we end up choosing to hold the queued work of {c}?",
    ),
    "number": (
        "The load test of {c} topped out at {v} requests per minute before latency rose.",
        "How much traffic could {c} take in the stress run, per minute, before it slowed?",
    ),
    "identifier": (
        "I filed the {c} outage under ticket {v} so we can track the follow-ups there.",
        "Which reference did the incident report about {c} get?",
    ),
    "name": (
        "From now on {v} owns the {c} rollout; send review requests for it their way.",
        "Who did we say is in charge of shipping {c}?",
    ),
    "preference": (
        "One rule for {c} from my side: I want {v}, every time.",
        "What working habit did I ask you to keep to whenever {c} is involved?",
    ),
    "correction": (
        "Change of plan for {c}: it goes to the {v} region instead, this is final.",
        "In the end, which region is {c} meant to run in?",
    ),
    "tool_output": (
        "{c} artifact digest: {v}",
        "When the {c} build ran, what checksum did it print for its output?",
    ),
    "second_page": (
        "NOTE {c}: the fallback mirror is {v}",
        "In that long dump I pasted, which host was named as the backup for {c}?",
    ),
}
CORRECTION_FIRST: Final = "Let's put {c} in the {v} region for now."
"""The earlier, overridden statement of a correction: only the later value is right."""

KINDS: Final = tuple(FACTS)

DECISIONS: Final = (
    "PostgreSQL",
    "Redis streams",
    "SQLite",
    "RabbitMQ",
    "Kafka",
    "NATS JetStream",
    "a plain S3 bucket",
    "DynamoDB",
    "Beanstalkd",
    "CockroachDB",
)
PEOPLE: Final = (
    "Mirela Okonkwo",
    "Tobias Lindqvist",
    "Aiyana Castellanos",
    "Rufus Wainwright-Abe",
    "Ngozi Halvorsen",
    "Emeric Sandoval",
    "Priya Valkonen",
    "Oswin Achterberg",
    "Leontine Marchetti",
    "Dario Kowalczyk",
    "Sunniva Oyelaran",
    "Casimir Delacroix",
)
PREFERENCES: Final = (
    "squash merges",
    "British spelling in the docs",
    "feature branches named after tickets",
    "type hints on every function",
    "small commits with imperative subjects",
    "no deploys on Fridays",
    "tests written before the fix",
    "tabs for indentation",
    "changelog entries with every change",
    "screenshots in every pull request",
)
REGIONS: Final = (
    "frankfurt",
    "oregon",
    "singapore",
    "sao paulo",
    "dublin",
    "montreal",
    "sydney",
    "stockholm",
    "mumbai",
    "tokyo",
    "virginia",
    "zurich",
)
HOSTS: Final = (
    "mirror-kestrel.internal",
    "backup-heron.lan",
    "fallback-osprey.corp",
    "replica-plover.internal",
    "standby-curlew.lan",
    "spare-avocet.corp",
    "cold-lapwing.internal",
    "reserve-dunlin.lan",
)

SYLLABLES: Final = (
    "quor",
    "vex",
    "zan",
    "thel",
    "oru",
    "mib",
    "kal",
    "dris",
    "fen",
    "wyr",
    "pax",
    "lum",
    "tor",
    "iv",
    "syl",
    "gar",
    "nox",
    "bre",
    "vau",
    "jen",
    "cos",
    "mur",
    "yal",
    "ek",
)
"""Codenames are made of these: words no template or filler holds."""
