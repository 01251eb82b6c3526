"""`pii`: personal data and secrets. `check` finds and redacts them; `patterns` holds their shapes
and validators (Luhn, mod 97, issuer ranges); `context` decides ambiguous numbers by the keyword
nearest before them and by the shapes they must not be (versions, dates, ISBNs, order numbers)."""
