"""robotlab_django: RobotLab's reusable Django app (threads, results, admin, scaffolding).

Add ``"robotlab_django"`` to ``INSTALLED_APPS``; its app label is ``robotlab``. This module is
deliberately empty: importing models here would break app loading.
"""
