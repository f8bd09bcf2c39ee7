"""An example tool pack for ollm: copy this folder to start your own."""
