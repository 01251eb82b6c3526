"""The documentation's commands run as written, and its output compared with what the gateway prints:
each block taken with tests.support.doc_blocks.doc_block (tests/project/test_docs_blocks.py fails on a
block that no test takes)."""
