"""OpenTelemetry in the app: the spans of its runs kept in its database, carried through Celery jobs, drawn as SVG."""
