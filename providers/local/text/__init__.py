"""The text side of decoding: token ids to text as they stream (`detokenizer`), and where a stop
sequence ends a choice (`stops`). Leaves of the engine: they import nothing of it."""
