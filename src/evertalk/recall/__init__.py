"""`evertalk bench recall`: what the memory lets Ever recall, and at what cost (SPEC §14).

`generator` writes a chat of ordinary agent work with planted facts and the questions about
them; `runner` imports it into a scratch home, builds the tree and asks each question as a
turn; `baseline` asks the same questions over the newest bytes of the raw log; `scoring`,
`report` and `chart` turn the answers into figures. `command` is the entry of the command line.
"""
