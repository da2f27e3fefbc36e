from evertalk.cli import entry

raise SystemExit(entry())
