"""An example provider plugin for ollm: copy this folder to write your own."""
