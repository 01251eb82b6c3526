"""Tests of the gateway package, one folder per subpackage."""
