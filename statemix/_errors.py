"""The one exception type of statemix."""


class StatemixError(Exception):
    """Raised for corrupt, truncated or foreign input, and for invalid options."""
