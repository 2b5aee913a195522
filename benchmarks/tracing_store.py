"""What keeping the spans of runs costs the Django app (ROBOTLAB["TRACES"], robotlab_django.tracing).

One child process per mode runs the same app run many times (``services.run_robot`` of a robot with one tool: a
tool round, two model calls from a FakeLLM, the ``sync`` executor, SQLite in a temporary file) and prints the
process CPU per run:

* ``off``: ``TRACES`` off and no OpenTelemetry SDK (the core makes no span);
* ``sdk``: the project's own SDK tracer provider with a ``BatchSpanProcessor`` to an exporter that drops the spans,
  ``TRACES`` off (the cost of tracing itself);
* ``kept``: ``TRACES`` on, the app's provider and span processor (its batch thread set not to write while the
  runs are timed), then the write itself: one ``force_flush`` of every queued span (``bulk_create``), per span.

The modes rotate over ``--rounds`` and the medians are printed.

    .venv/bin/python benchmarks/tracing_store.py [--runs 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("off", "sdk", "kept")


def _child(mode: str, runs: int, database: str) -> dict[str, Any]:
    os.environ.update(DJANGO_SETTINGS_MODULE="tests.robotlab_django.settings", ROBOTLAB_TEST_SQLITE_PATH=database,
                      ROBOTLAB_TEST_TRACES="1" if mode == "kept" else "0")
    sys.path.insert(0, ROOT)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test.utils import override_settings

    from robotlab.testing import FakeLLM, text, tool_call
    from robotlab_django import services
    from robotlab_django.models import RunSpan

    call_command("migrate", verbosity=0)
    processor = None
    if mode == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
    elif mode == "kept":
        from robotlab_django.tracing import processor as processors

        processor = processors.install(schedule_delay_millis=3_600_000, max_queue_size=1_000_000,
                                       max_export_batch_size=1_000_000)

    def llm() -> FakeLLM:
        return FakeLLM([tool_call("add", a=1, b=2, usage=(40, 8), cost=0.0001), text("3", usage=(60, 2))])

    with override_settings(ROBOTLAB={**settings.ROBOTLAB, "LLM": llm}):
        for _ in range(20):
            services.run_robot("warm-up", "calculator", "1 + 2?")
        if processor is not None:
            processor.force_flush()
        before = RunSpan.objects.count()
        started = time.process_time()
        for index in range(runs):
            services.run_robot(f"bench-{index % 10}", "calculator", "1 + 2?")
        cpu = (time.process_time() - started) / runs
        write = written = 0.0
        if processor is not None:
            queued = len(processor.marks)
            started = time.process_time()
            processor.force_flush()
            write = time.process_time() - started
            written = RunSpan.objects.count() - before
            assert written == queued, (written, queued)
    return {"cpu_per_run_ms": cpu * 1000, "spans": written,
            "write_per_span_us": write / written * 1e6 if written else 0.0,
            "spans_per_run": written / runs if written else 0.0}


def main() -> None:
    """Run every mode ``--rounds`` times in child processes and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--database")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.runs, args.database)))
        return
    print(f"load average at start: {os.getloadavg()}")
    figures: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for mode in MODES[round_ % len(MODES):] + MODES[: round_ % len(MODES)]:
                database = os.path.join(folder, f"{mode}-{round_}.sqlite3")
                out = subprocess.run([sys.executable, __file__, "--child", mode, "--runs", str(args.runs),
                                      "--database", database], cwd=ROOT, capture_output=True, text=True, check=True)
                figures[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    off = statistics.median(f["cpu_per_run_ms"] for f in figures["off"])
    print(f"{'mode':<6} {'CPU per app run':>16} {'vs off':>8} {'spans/run':>10} {'write per span':>15}")
    for mode in MODES:
        cpu = statistics.median(f["cpu_per_run_ms"] for f in figures[mode])
        spans = statistics.median(f["spans_per_run"] for f in figures[mode])
        write = statistics.median(f["write_per_span_us"] for f in figures[mode])
        print(f"{mode:<6} {cpu:>13.2f} ms {cpu / off:>8.3f} {spans:>10.1f} "
              f"{(f'{write:.0f} us' if write else '-'):>15}")


if __name__ == "__main__":
    main()
