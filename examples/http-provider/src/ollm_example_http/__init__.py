"""An example ollm provider plugin for an HTTP server, built only on ollm's public kit."""
