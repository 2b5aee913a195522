"""Template filters and tags of the RobotLab app (``{% load robotlab_format %}``, ``{% load robotlab_pages %}``)."""
