"""Registration module of the ollm_react plugin (work in progress)."""
