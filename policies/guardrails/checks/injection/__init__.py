"""`injection`: the layered prompt-injection and jailbreak detector. `check` scores a text from the
signals (`signals`, with the families in `override`, `indirect`, `extraction`, `persona`,
`framing`, `structure` and `semantic`, their words in `vocab`) found in its folded text and in every view
`decoded` makes of it (base64, hex, Morse, ROT13, leetspeak, spaced letters, hidden carriers)."""
