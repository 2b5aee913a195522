"""Celery workers: warm-up before the first job, presence for the pages and checks, the broker guard."""
