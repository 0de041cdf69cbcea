"""The statemix command line (installed as the package ``statemix_cli``)."""
