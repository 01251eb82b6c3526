"""The project itself: layout, locks, deployment files, documentation, benchmark scripts."""
