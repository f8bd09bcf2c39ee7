"""The chat runtime: turns, parallel tool calls, limits, cancellation, events.

Internal: not part of ollm's public API (import its public names from ``ollm``:
``ollm.ChatClient``...); its layout may change in any release.
"""

from ollm.runtime.client import ChatClient, ChatResult, ChatStream, Prompt
from ollm.runtime.conversation import Conversation
from ollm.runtime.native import NativeStrategy
from ollm.runtime.settings import DEFAULT_CONTEXT_WINDOW, ChatSettings
from ollm.runtime.sync import SyncChatClient
from ollm.runtime.tokens import TokenBudget, count_request_tokens

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "ChatClient",
    "ChatResult",
    "ChatSettings",
    "ChatStream",
    "Conversation",
    "NativeStrategy",
    "Prompt",
    "SyncChatClient",
    "TokenBudget",
    "count_request_tokens",
]
