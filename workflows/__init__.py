"""The bundled workflows: data files, read with importlib.resources.

This marker makes `delivery.bundled.workflows` importable from an editable install too
(setuptools maps this folder into the package; a folder without `__init__.py` is not
found there).
"""
