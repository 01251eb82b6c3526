"""Where the request log's rows live: one interface (`base`), SQLite in a file (`sqlite`, the
embedded default) and PostgreSQL (`postgres`, shared by replicas), the versioned schema both apply
(`migrations`), and the choice by URL (`opening`)."""
