"""Registration module of the ollm_testutils plugin (work in progress)."""
