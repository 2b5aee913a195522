"""Robot tools on the project's own models, under the run's user's rights: :func:`model_tools`."""

from __future__ import annotations

from .model_tools import ModelTool, model_tools
from .rights import ModelRights, Scope

__all__ = ["ModelRights", "ModelTool", "Scope", "model_tools"]
