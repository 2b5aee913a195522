"""Management commands of robotlab_django."""
