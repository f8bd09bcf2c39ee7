"""Plugin discovery through the ``ollm.plugins`` entry-point group.

Internal: not part of ollm's public API (import ``ollm.discover`` and
``ollm.PluginSettings`` from ``ollm``); its layout may change in any release.
"""

from ollm.plugins.loader import ENTRY_POINT_GROUP, build_plugin_manager, discover
from ollm.plugins.settings import PluginSettings

__all__ = ["ENTRY_POINT_GROUP", "PluginSettings", "build_plugin_manager", "discover"]
