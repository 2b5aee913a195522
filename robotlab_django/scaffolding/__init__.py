"""The scaffolds of ``manage.py startrobot`` and friends: names, templates, writing files safely."""
