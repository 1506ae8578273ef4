"""Onboarding a model: ``mlrepro init`` reads a model's signature and a data folder, and writes a
complete manifest and the data's checksum list; the preprocessing comes from a named preset
(``_presets.py``) or is discovered on a labelled subset (``_discovery.py``), never silently.

Importing this package imports no ML framework: each format's reader imports only its own.
"""
