"""The runnable examples of examples/, each run against a real gateway."""
