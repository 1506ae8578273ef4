"""Builders for the models of the built-in examples. Register them by importing a module here
(the project's ``conftest.py`` does); nothing here imports a framework until a builder runs."""
