"""`--workers N`: the folder where every worker keeps its series, so that one scrape sums them all.

prometheus-client reads PROMETHEUS_MULTIPROC_DIR once, when it is first imported: the parent sets
it (on an emptied folder) before importing the app and forking; when a worker exits, its live
gauges (in flight, circuit state) are dropped while its counters keep counting in the totals.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gateway.config.observability import MetricsConfig

ENV = "PROMETHEUS_MULTIPROC_DIR"


def share_between_workers(config: MetricsConfig, workers: int) -> Callable[[], None]:
    """Prepare the folder when several workers will serve; returns what to call once they all stopped."""
    if workers == 1 or not config.enabled:
        return lambda: None
    if "prometheus_client" in sys.modules:
        raise RuntimeError(f"{ENV} must be set before prometheus_client is imported")
    given = config.multiprocess_dir or os.environ.get(ENV, "")
    path = Path(given or tempfile.mkdtemp(prefix="gateway-metrics-"))
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):  # series of an earlier run would be summed with this one's
        stale.unlink()
    os.environ[ENV] = str(path)
    if given:
        return lambda: None
    return lambda: shutil.rmtree(path, ignore_errors=True)


def worker_exited(pid: int) -> None:
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
