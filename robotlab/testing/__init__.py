"""Test doubles for robots: FakeLLM, FunctionLLM, the fake OpenAI-compatible server, and a guard."""

from __future__ import annotations
