"""pytest plugin of ollm-testutils (work in progress)."""
