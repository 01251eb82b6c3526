"""Obfuscation, for the `injection` check: more carriers to decode (`codes`: base32, base85, binary,
decimal and octal codes, percent-encoding, entities, escapes; `ciphers`: letter shifts, Atbash, NATO,
braille, Pig Latin, disguised letters), payloads split to be reassembled (`smuggling`), the request to
decode and obey (`intent`), and optimised gibberish after a request (`suffix`). `decoded` builds the
views from these; `intent.WEIGHTS` lists their signals."""
