"""The request log: every client-API request's record, stored in SQLite or PostgreSQL and read back by
the admin API (`/admin/requests…`).

`rows` turns a finished `observability.record.RequestRecord` into a row, which `intake` queues
(bounded, never waited for) as the request ends; `writer` drains it in batches into a store
(`stores/`: SQLite, PostgreSQL, their migrations), counting and logging what it must drop;
`retention` prunes old rows in small batches; `filters` and `queries` turn the admin API's query
parameters into SQL, `routes` serves them; `service` wires one app's log together.

It imports `observability` (the record), `config` and `api` (the error envelope); only the
composition root (`gateway.app`) imports it.
"""
