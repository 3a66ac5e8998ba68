r"""Parts the package's models are built from."""
