"""Registration module of the ollm_ollama plugin (work in progress)."""
