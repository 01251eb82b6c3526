"""`pii`: personal data and secrets. `check` finds and redacts them; `patterns` holds their shapes
and validators (Luhn, mod 97, issuer ranges); `context` decides ambiguous numbers by the keyword
nearest before them and by the shapes they must not be (versions, dates, ISBNs, order numbers);
`shapes` refutes phone candidates by their layout and neighbours; `labels` by what the words before
them name them (another thing's identifier, a register's acronym, a postal code), `native` the same in
other scripts; `addresses` reads dotted quads and colon-hex (versions, byte strings); `national` reads
libphonenumber's national formats and calling codes."""
