"""Template filters of the RobotLab app (``{% load robotlab_format %}``)."""
